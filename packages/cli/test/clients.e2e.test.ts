import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { tool as langchainTool } from '@langchain/core/tools';
import { ChatOpenAI } from '@langchain/openai';
import { APICallError, generateObject, generateText, stepCountIs, streamText, tool } from 'ai';
import { z } from 'zod';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startOpenAITestServer, type OpenAITestServer } from '@svc/node-agent/testing';
import { createTestStore, type TestStore } from '@svc/server/testing';
import { spawnSvc, until, waitForUrl, type SpawnedSvc } from './spawn.js';

const run = promisify(execFile);

/** Python's `openai` package, where it is installed (`pip install openai`); else why not. */
async function probePythonOpenAI(): Promise<{ available: true } | { available: false; reason: string }> {
  try {
    await run('python3', ['-c', 'import openai'], { timeout: 30_000 });
    return { available: true };
  } catch (err) {
    const why =
      String((err as { stderr?: string }).stderr ?? err)
        .trim()
        .split('\n')
        .at(-1) ?? 'unknown';
    return {
      available: false,
      reason: `python3 cannot import openai (${why}); \`pip install openai\` reaches no package index on this machine`,
    };
  }
}
const python = await probePythonOpenAI();
if (!python.available) console.log(`[svc test] SKIPPED the Python openai client test: ${python.reason}`);

// npm test: one store: the subject is how clients we did not write read our answers and errors on the wire; the
// same routes and errors run on both stores in packages/server/src/modules/gateway/*.test.ts.

/**
 * Clients nobody here wrote, against real `svc serve` and `svc node` processes: each must read
 * our errors (OpenAI's envelope under /v1/, docs/errors.md): the official openai client, the
 * Vercel AI SDK, LangChain JS and, where installed, Python's openai.
 */
describe('third-party OpenAI clients read our errors, against svc serve and svc node processes', () => {
  let store: TestStore;
  let upstream: OpenAITestServer;
  let dir: string;
  let server: SpawnedSvc;
  let node: SpawnedSvc | undefined;
  let base = '';
  let buyerKey = '';

  beforeAll(async () => {
    store = await createTestStore();
    upstream = await startOpenAITestServer();
    dir = mkdtempSync(join(tmpdir(), 'svc-clients-e2e-'));
    server = spawnSvc(['serve'], {
      SVC_DATA_DIR: store.dataDir,
      SVC_PORT: '0',
      SVC_LOG_LEVEL: 'warn',
      // Three cents of free tier: a tinyllama chat holds 2 cents; a 32k-token phi-4 chat (5 cents) is 402.
      SVC_FREE_TIER_CENTS: '3',
      ...(store.databaseUrl ? { DATABASE_URL: store.databaseUrl } : {}),
    });
    base = await waitForUrl(server);
    const post = async (path: string, body: unknown, key?: string) =>
      (await (
        await fetch(`${base}${path}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
          body: JSON.stringify(body),
        })
      ).json()) as { api_key: string; token: string };
    // The owner's session mints the node's operator key (a buyer key may not grant operator).
    const operator = (await post('/api/v1/auth/signup', { email: 'op@clients.test', password: 'clients e2e password' }))
      .token;
    const nodeKey = (await post('/api/v1/auth/api-keys', { label: 'node', scopes: ['operator'] }, operator)).api_key;
    buyerKey = (await post('/api/v1/auth/signup', { email: 'buyer@clients.test', password: 'clients e2e password' }))
      .api_key;
    const proc = spawnSvc(
      [
        'node',
        '--server',
        base,
        '--data-dir',
        join(dir, 'node'),
        '--name',
        'upstream',
        '--country',
        'CA',
        '--upstream',
        upstream.url,
        '--model',
        'tinyllama',
        '--model',
        'phi-4',
      ],
      { SVC_NODE_API_KEY: nodeKey },
    );
    node = proc;
    await until('node registration', async () => /registered (node_[a-z0-9]+)/.exec(proc.stdout())?.[1], 90_000);
  }, 240_000);

  afterAll(async () => {
    node?.child.kill('SIGKILL');
    server.child.kill('SIGTERM');
    await server.exited;
    await upstream.close();
    rmSync(dir, { recursive: true, force: true });
    await store.drop();
  });

  it('the openai npm client: our message, code, type, param and status; a mid-stream failure shows our message', async () => {
    const client = new OpenAI({ apiKey: buyerKey, baseURL: `${base}/v1`, maxRetries: 0 });
    const missing = await client.chat.completions
      .create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] })
      .catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(OpenAI.NotFoundError);
    expect(missing).toMatchObject({
      status: 404,
      code: 'model_not_found',
      type: 'invalid_request_error',
      param: 'model',
    });
    expect((missing as Error).message).toMatch(
      /^404 The model 'gpt-4o' does not exist in the catalogue; chat models: phi-4, svc-llama-3.2-3b, tinyllama/,
    );
    expect((missing as InstanceType<typeof OpenAI.APIError>).requestID).toMatch(/.+/);
    const bad = await client.chat.completions
      .create({ model: 'tinyllama', messages: [{ role: 'user', content: 'hi' }], temperature: 3 })
      .catch((e: unknown) => e);
    expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
    expect(bad).toMatchObject({
      status: 400,
      code: 'invalid_request',
      type: 'invalid_request_error',
      param: 'temperature',
    });

    upstream.setFailure({ dropAfterChunks: 2 });
    try {
      const stream = await client.chat.completions.create({
        model: 'tinyllama',
        messages: [{ role: 'user', content: 'alpha beta gamma' }],
        stream: true,
      });
      const midStream = await (async () => {
        for await (const chunk of stream) void chunk;
      })().catch((e: unknown) => e);
      expect(midStream).toBeInstanceOf(OpenAI.APIError);
      expect((midStream as Error).message).toMatch(/failed mid-stream/);
    } finally {
      upstream.setFailure(undefined);
    }
  }, 60_000);

  it('the Vercel AI SDK (openai-compatible provider) shows our message for a 402, and answers a chat', async () => {
    const svc = createOpenAICompatible({ name: 'svc', baseURL: `${base}/v1`, apiKey: buyerKey });
    const ok = await generateText({ model: svc.chatModel('tinyllama'), prompt: 'from the ai sdk', maxRetries: 0 });
    expect(ok.text).toBe('You said: from the ai sdk');
    const broke = await generateText({
      model: svc.chatModel('phi-4'),
      prompt: 'a long one',
      maxOutputTokens: 32_768,
      maxRetries: 0,
    }).catch((e: unknown) => e);
    expect(APICallError.isInstance(broke)).toBe(true);
    const err = broke as APICallError;
    expect(err.statusCode).toBe(402);
    expect(err.message).toMatch(
      /^insufficient credits: \d+ cents available, 5 cents needed; top up or lower the budget$/,
    );
    expect(err.data).toMatchObject({
      error: { code: 'insufficient_credits', type: 'insufficient_quota', param: null },
    });
  }, 60_000);

  it('LangChain JS maps our 404 model_not_found to MODEL_NOT_FOUND with our message', async () => {
    const chat = (model: string) =>
      new ChatOpenAI({ model, apiKey: buyerKey, configuration: { baseURL: `${base}/v1` }, maxRetries: 0 });
    const answer = await chat('tinyllama').invoke('from langchain');
    expect(answer.content).toBe('You said: from langchain');
    const missing = await chat('gpt-4o')
      .invoke('hi')
      .catch((e: unknown) => e);
    expect(missing).toMatchObject({ status: 404, code: 'model_not_found', lc_error_code: 'MODEL_NOT_FOUND' });
    expect((missing as Error).message).toContain("The model 'gpt-4o' does not exist in the catalogue");
  }, 60_000);

  it.skipIf(!python.available)(
    "Python's openai raises NotFoundError with our code and message",
    async () => {
      const script = join(dir, 'probe.py');
      writeFileSync(
        script,
        [
          'import json, sys, openai',
          'c = openai.OpenAI(api_key=sys.argv[2], base_url=sys.argv[1], max_retries=0)',
          'out = {}',
          'try:',
          "    c.chat.completions.create(model='gpt-4o', messages=[{'role': 'user', 'content': 'hi'}])",
          'except openai.NotFoundError as e:',
          "    out['not_found'] = {'status': e.status_code, 'code': e.code, 'type': e.type, 'param': e.param, 'message': e.message}",
          'print(json.dumps(out))',
        ].join('\n'),
      );
      const { stdout } = await run('python3', [script, `${base}/v1`, buyerKey], { timeout: 60_000 });
      const out = JSON.parse(stdout) as {
        not_found?: { status: number; code: string; type: string; param: string; message: string };
      };
      expect(out.not_found).toMatchObject({
        status: 404,
        code: 'model_not_found',
        type: 'invalid_request_error',
        param: 'model',
      });
      expect(out.not_found?.message).toContain("The model 'gpt-4o' does not exist in the catalogue");
    },
    60_000,
  );
  /** The chat surface (issue 41): what the upstream received last, as the node's engine sent it. */
  const lastUpstream = () =>
    upstream.requests.filter((r) => r.path === '/v1/chat/completions').at(-1)?.body as
      Record<string, unknown> | undefined;

  it('the Vercel AI SDK (@ai-sdk/openai): generateText runs a tool and answers from its result; streamText streams the call; generateObject returns a zod object', async () => {
    const provider = createOpenAI({ apiKey: buyerKey, baseURL: `${base}/v1` });
    const executed: { city: string }[] = [];
    const weather = tool({
      description: 'the weather in a city',
      inputSchema: z.object({ city: z.string() }),
      execute: async ({ city }) => {
        executed.push({ city });
        return { city, celsius: 21 };
      },
    });
    const text = await generateText({
      model: provider.chat('tinyllama'),
      prompt: 'Paris',
      tools: { weather },
      stopWhen: stepCountIs(3),
      maxRetries: 0,
    });
    expect(executed).toEqual([{ city: 'Paris' }]);
    expect(text.steps[0]?.finishReason).toBe('tool-calls');
    expect(text.text).toBe('The tool said: {"city":"Paris","celsius":21}');
    // The second turn carried the call and its result back, as OpenAI's messages.
    const sent = lastUpstream()?.messages as Record<string, unknown>[];
    expect(sent.map((m) => m.role)).toEqual(['user', 'assistant', 'tool']);
    expect(sent[2]).toMatchObject({ tool_call_id: text.steps[0]?.toolCalls[0]?.toolCallId });

    const streamed = streamText({
      model: provider.chat('tinyllama'),
      prompt: 'Oslo',
      tools: { weather: tool({ description: 'the weather', inputSchema: z.object({ city: z.string() }) }) },
      maxRetries: 0,
    });
    const calls = await streamed.toolCalls;
    expect(calls.map((c) => [c.toolName, c.input])).toEqual([['weather', { city: 'Oslo' }]]);
    expect(await streamed.finishReason).toBe('tool-calls');
    expect(lastUpstream()).toMatchObject({
      stream: true,
      tools: [{ type: 'function', function: { name: 'weather' } }],
    });

    const object = await generateObject({
      model: provider.chat('tinyllama'),
      schema: z.object({ city: z.string(), visits: z.number().int() }),
      prompt: 'Rome twice',
      maxRetries: 0,
    });
    expect(object.object).toEqual({ city: 'Rome twice', visits: 2 });
    expect(lastUpstream()?.response_format).toMatchObject({ type: 'json_schema' });
  }, 120_000);

  it('LangChain JS (@langchain/openai): bindTools gets the call back, withStructuredOutput a zod object', async () => {
    const llm = new ChatOpenAI({
      model: 'tinyllama',
      apiKey: buyerKey,
      configuration: { baseURL: `${base}/v1` },
      maxRetries: 0,
    });
    const weather = langchainTool(async ({ city }: { city: string }) => `sunny in ${city}`, {
      name: 'weather',
      description: 'the weather in a city',
      schema: z.object({ city: z.string() }),
    });
    const called = await llm.bindTools([weather]).invoke('Lima');
    expect(called.tool_calls?.map((c) => [c.name, c.args])).toEqual([['weather', { city: 'Lima' }]]);
    expect(lastUpstream()?.tools).toMatchObject([{ type: 'function', function: { name: 'weather' } }]);

    const structured = await llm
      .withStructuredOutput(z.object({ city: z.string(), rainy: z.boolean() }), { name: 'forecast' })
      .invoke('Quito');
    expect(structured).toEqual({ city: 'Quito', rainy: true });
  }, 120_000);

  it('the openai npm client: a streamed answer has X-SVC-Receipt in its head, the id of its stored receipt', async () => {
    const client = new OpenAI({ apiKey: buyerKey, baseURL: `${base}/v1`, maxRetries: 0 });
    const { data: stream, response } = await client.chat.completions
      .create({ model: 'tinyllama', messages: [{ role: 'user', content: 'hello' }], stream: true })
      .withResponse();
    let last: Record<string, unknown> = {};
    for await (const chunk of stream) last = chunk as unknown as Record<string, unknown>;
    const header = response.headers.get('x-svc-receipt');
    expect(header).toMatch(/^rcpt_/);
    expect(last.svc_receipt_id).toBe(header);
    const receipts = (await (
      await fetch(`${base}/api/v1/job/receipts/${String(last.id)}`, {
        headers: { authorization: `Bearer ${buyerKey}` },
      })
    ).json()) as { receipts: { id: string }[] };
    expect(receipts.receipts.map((r) => r.id)).toEqual([header]);
  }, 60_000);

  it.skipIf(!python.available)(
    "Python's openai: tools, response_format json_schema and streamed tool calls",
    async () => {
      const script = join(dir, 'surface.py');
      writeFileSync(
        script,
        [
          'import json, sys, openai',
          'c = openai.OpenAI(api_key=sys.argv[2], base_url=sys.argv[1], max_retries=0)',
          "tools = [{'type': 'function', 'function': {'name': 'weather', 'parameters': {'type': 'object', 'properties': {'city': {'type': 'string'}}, 'required': ['city']}}}]",
          "r = c.chat.completions.create(model='tinyllama', messages=[{'role': 'user', 'content': 'Paris'}], tools=tools)",
          'call = r.choices[0].message.tool_calls[0]',
          "schema = {'type': 'object', 'properties': {'city': {'type': 'string'}}, 'required': ['city'], 'additionalProperties': False}",
          "j = c.chat.completions.create(model='tinyllama', messages=[{'role': 'user', 'content': 'Rome'}], response_format={'type': 'json_schema', 'json_schema': {'name': 'p', 'schema': schema, 'strict': True}})",
          "args = ''",
          'finish = None',
          "for chunk in c.chat.completions.create(model='tinyllama', messages=[{'role': 'user', 'content': 'Oslo'}], tools=tools, stream=True):",
          '    if chunk.choices and chunk.choices[0].delta.tool_calls:',
          "        args += chunk.choices[0].delta.tool_calls[0].function.arguments or ''",
          '    if chunk.choices and chunk.choices[0].finish_reason:',
          '        finish = chunk.choices[0].finish_reason',
          "print(json.dumps({'finish': r.choices[0].finish_reason, 'name': call.function.name, 'args': json.loads(call.function.arguments), 'json': json.loads(j.choices[0].message.content), 'streamed': json.loads(args), 'stream_finish': finish}))",
        ].join('\n'),
      );
      const { stdout } = await run('python3', [script, `${base}/v1`, buyerKey], { timeout: 60_000 });
      expect(JSON.parse(stdout)).toEqual({
        finish: 'tool_calls',
        name: 'weather',
        args: { city: 'Paris' },
        json: { city: 'Rome' },
        streamed: { city: 'Oslo' },
        stream_finish: 'tool_calls',
      });
    },
    60_000,
  );
});

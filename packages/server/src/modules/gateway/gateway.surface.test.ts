import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { APIError } from 'openai';
import type OpenAI from 'openai';
import { createOpenAIUpstreamEngine, type Engine } from '@svc/node-agent';
import { startOpenAITestServer, type OpenAITestServer } from '@svc/node-agent/testing';
import { readWorkResult } from '../work/results.js';
import { startGatewayFixture, type GatewayFixture, type GatewayNode } from '../../../test/gateway-fixture.js';

type Receipt = { id: string; job_id: string; node_id: string; result_hash: string };

const weather: OpenAI.Chat.ChatCompletionTool = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'the weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
};

/** Reads an SSE answer: its head and its `data:` payloads. */
async function sse(f: GatewayFixture, body: Record<string, unknown>) {
  const res = await fetch(`${f.server.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${f.buyer.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ ...body, stream: true }),
  });
  const text = await res.text();
  const data = text
    .split('\n\n')
    .filter((l) => l.startsWith('data: '))
    .map((l) => l.slice(6));
  const chunks = data.filter((d) => d !== '[DONE]').map((d) => JSON.parse(d) as Record<string, unknown>);
  return { res, chunks, done: data.at(-1) === '[DONE]' };
}

/**
 * The whole chat surface (DESIGN.md section 10, issue 41): tools, JSON output and sampling fields
 * reach the node's engine and come back as OpenAI's; a field no engine honours is a 400 naming it.
 */
describe('the whole chat surface through a real server and real node agents', () => {
  let f: GatewayFixture;
  let modern: GatewayNode;
  let old: GatewayNode;
  let oldUpstream: OpenAITestServer;
  let oldEngine: Engine;
  let client: OpenAI;
  beforeAll(async () => {
    f = await startGatewayFixture();
    modern = await f.addNode({ country: 'CA', models: ['tinyllama'] });
    // An agent from before `chat_fields`: its engine declares nothing, so it honours the plain fields only.
    oldUpstream = await startOpenAITestServer();
    const { chatFields: _declared, ...undeclared } = createOpenAIUpstreamEngine({
      baseUrl: oldUpstream.url,
      models: new Map([
        ['tinyllama', 'tinyllama'],
        ['phi-4', 'phi-4'],
      ]),
    });
    oldEngine = undeclared;
    old = await f.addNode({
      country: 'CA',
      engines: new Map([
        ['tinyllama', oldEngine],
        ['phi-4', oldEngine],
      ]),
    });
    client = f.openai();
  });
  afterAll(async () => {
    await f.close();
    await oldEngine.close();
    await oldUpstream.close();
  });

  const upstreamBodies = () => (modern.upstream?.requests ?? []).map((r) => r.body as Record<string, unknown>);

  it('tool calling: the tools reach the engine, the answer is message.tool_calls with finish_reason tool_calls, and the tool result turn is answered', async () => {
    const first = await client.chat.completions
      .create({
        model: 'tinyllama',
        messages: [{ role: 'user', content: 'Paris' }],
        tools: [weather],
        tool_choice: 'auto',
        parallel_tool_calls: false,
      })
      .withResponse();
    const choice = first.data.choices[0];
    expect(choice?.finish_reason).toBe('tool_calls');
    expect(choice?.message.content).toBeNull();
    const call = choice?.message.tool_calls?.[0];
    expect(call).toMatchObject({ type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } });
    expect(first.response.headers.get('x-svc-node')).toBe(modern.nodeId);
    const sent = upstreamBodies().at(-1);
    expect(sent?.tools).toEqual([weather]);
    expect(sent?.tool_choice).toBe('auto');
    expect(sent?.parallel_tool_calls).toBe(false);
    // Billed like any chat, and the receipt signs the result that holds the calls.
    expect(first.data.usage?.completion_tokens).toBe(1);
    const receipt = ((await f.api('GET', `/api/v1/job/receipts/${first.data.id}`)).json.receipts as Receipt[])[0];
    const stored = await f.api('GET', `/api/v1/gateway/requests/${first.data.id}`);
    expect(JSON.stringify(stored.json)).toContain('get_weather');
    const work = (
      await f.server.ctx.db.query<{ work_id: string }>('SELECT work_id FROM receipts WHERE id = $1', [receipt?.id])
    ).rows[0];
    const bytes = (await readWorkResult(f.server.ctx, work?.work_id ?? ''))?.bytes;
    expect(JSON.parse(bytes?.toString('utf8') ?? '{}').tool_calls).toEqual(choice?.message.tool_calls);
    expect(receipt?.result_hash).toBe(
      createHash('sha256')
        .update(bytes ?? Buffer.alloc(0))
        .digest('hex'),
    );

    const second = await client.chat.completions.create({
      model: 'tinyllama',
      messages: [
        { role: 'user', content: 'Paris' },
        { role: 'assistant', content: null, tool_calls: choice?.message.tool_calls ?? [] },
        { role: 'tool', tool_call_id: call?.id ?? '', content: '{"celsius":21}' },
      ],
      tools: [weather],
    });
    expect(second.choices[0]?.message.content).toBe('The tool said: {"celsius":21}');
    expect(second.choices[0]?.finish_reason).toBe('stop');
    expect(upstreamBodies().at(-1)?.messages).toEqual([
      { role: 'user', content: 'Paris' },
      { role: 'assistant', content: null, tool_calls: choice?.message.tool_calls },
      { role: 'tool', tool_call_id: call?.id, content: '{"celsius":21}' },
    ]);
  });

  it('streams tool calls as delta.tool_calls fragments, with X-SVC-Receipt in the response head naming the stored receipt', async () => {
    const { res, chunks, done } = await sse(f, {
      model: 'tinyllama',
      messages: [{ role: 'user', content: 'Oslo' }],
      tools: [weather],
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
    });
    expect(done).toBe(true);
    const deltas = chunks.flatMap(
      (c) => (c.choices as { delta: { tool_calls?: Record<string, unknown>[] } }[])[0]?.delta.tool_calls ?? [],
    );
    expect(deltas[0]).toMatchObject({ index: 0, type: 'function', function: { name: 'get_weather' } });
    expect(typeof deltas[0]?.id).toBe('string');
    expect(deltas.map((d) => (d.function as { arguments?: string }).arguments ?? '').join('')).toBe('{"city":"Oslo"}');
    const last = chunks.at(-1) as { choices: { finish_reason: string }[]; svc_receipt_id: string; id: string };
    expect(last.choices[0]?.finish_reason).toBe('tool_calls');
    const header = res.headers.get('x-svc-receipt');
    expect(header).toMatch(/^rcpt_/);
    expect(header).toBe(last.svc_receipt_id);
    const receipts = (await f.api('GET', `/api/v1/job/receipts/${last.id}`)).json.receipts as Receipt[];
    expect(receipts.map((r) => r.id)).toEqual([header]);
  });

  it('a plain stream carries X-SVC-Receipt too, the id of its stored receipt', async () => {
    const { res, chunks } = await sse(f, { model: 'tinyllama', messages: [{ role: 'user', content: 'hello there' }] });
    const last = chunks.at(-1) as { svc_receipt_id: string; id: string };
    expect(res.headers.get('x-svc-receipt')).toBe(last.svc_receipt_id);
    const receipts = (await f.api('GET', `/api/v1/job/receipts/${last.id}`)).json.receipts as Receipt[];
    expect(receipts[0]?.id).toBe(res.headers.get('x-svc-receipt'));
  });

  it('JSON output and every sampling field reach the engine unchanged', async () => {
    const schema = {
      type: 'object',
      properties: { city: { type: 'string' }, words: { type: 'integer' } },
      required: ['city', 'words'],
      additionalProperties: false,
    };
    const fields = {
      response_format: { type: 'json_schema', json_schema: { name: 'place', schema, strict: true } },
      stop: ['\n\n', 'END'],
      top_p: 0.9,
      seed: 42,
      presence_penalty: 0.5,
      frequency_penalty: -0.25,
      logit_bias: { '50256': -100 },
      user: 'end-user-7',
    } as const;
    const answer = await client.chat.completions.create({
      model: 'tinyllama',
      messages: [{ role: 'user', content: 'Rome Italy' }],
      ...fields,
      n: 1,
    } as unknown as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming);
    expect(JSON.parse(answer.choices[0]?.message.content ?? '')).toEqual({ city: 'Rome Italy', words: 2 });
    const sent = upstreamBodies().at(-1) ?? {};
    for (const [field, value] of Object.entries(fields)) expect(sent[field], field).toEqual(value);
    expect(sent.n).toBeUndefined();

    const json = await client.chat.completions.create({
      model: 'tinyllama',
      messages: [{ role: 'user', content: 'hi' }],
      response_format: { type: 'json_object' },
      stop: 'END',
    });
    expect(JSON.parse(json.choices[0]?.message.content ?? '')).toEqual({ echo: 'hi' });
    expect(upstreamBodies().at(-1)).toMatchObject({ response_format: { type: 'json_object' }, stop: 'END' });
  });

  it('routing prefers the node whose engine honours the fields; where none does, a 400 names the field', async () => {
    for (let i = 0; i < 6; i++) {
      const r = await client.chat.completions
        .create({ model: 'tinyllama', messages: [{ role: 'user', content: `x${i}` }], seed: i })
        .withResponse();
      expect(r.response.headers.get('x-svc-node')).toBe(modern.nodeId);
    }
    // phi-4 is served by the old agent alone.
    const refused = (await client.chat.completions
      .create({ model: 'phi-4', messages: [{ role: 'user', content: 'hi' }], tools: [weather] })
      .catch((e: unknown) => e)) as APIError;
    expect(refused.status).toBe(400);
    expect(refused.error).toMatchObject({ param: 'tools', code: 'invalid_request', type: 'invalid_request_error' });
    expect(refused.message).toContain('tools is not supported by the engine of any live node serving phi-4');
    const stop = await f.api('POST', '/v1/chat/completions', {
      model: 'phi-4',
      messages: [{ role: 'user', content: 'hi' }],
      stop: 'x',
    });
    expect(stop.status).toBe(400);
    expect(stop.json.error).toMatchObject({ param: 'stop' });
    // n above 1: no engine here returns several choices.
    const n = await f.api('POST', '/v1/chat/completions', {
      model: 'tinyllama',
      messages: [{ role: 'user', content: 'hi' }],
      n: 2,
    });
    expect(n.status).toBe(400);
    expect(n.json.error).toMatchObject({ param: 'n' });
    // The plain fields still reach the old agent, which never saw a field it would drop.
    const plain = await client.chat.completions
      .create({ model: 'phi-4', messages: [{ role: 'user', content: 'hi' }], n: 1 })
      .withResponse();
    expect(plain.response.headers.get('x-svc-node')).toBe(old.nodeId);
    expect(Object.keys(oldUpstream.requests.at(-1)?.body ?? {}).sort()).toEqual(['messages', 'model', 'temperature']);
  });

  it('refuses tool turns that do not hold together with a 400 naming the field', async () => {
    const nullUser = await f.api('POST', '/v1/chat/completions', {
      model: 'tinyllama',
      messages: [{ role: 'user', content: null }],
    });
    expect(nullUser.status).toBe(400);
    expect(nullUser.json.error).toMatchObject({ param: 'messages[0].content' });
    const noId = await f.api('POST', '/v1/chat/completions', {
      model: 'tinyllama',
      messages: [{ role: 'tool', content: 'x' }],
      tools: [weather],
    });
    expect(noId.status).toBe(400);
    expect(noId.json.error).toMatchObject({ param: 'messages[0].tool_call_id' });
    const unknownTool = await f.api('POST', '/v1/chat/completions', {
      model: 'tinyllama',
      messages: [{ role: 'user', content: 'x' }],
      tools: [weather],
      tool_choice: { type: 'function', function: { name: 'nope' } },
    });
    expect(unknownTool.status).toBe(400);
    expect(unknownTool.json.error).toMatchObject({ param: 'tool_choice' });
    const badFormat = await f.api('POST', '/v1/chat/completions', {
      model: 'tinyllama',
      messages: [{ role: 'user', content: 'x' }],
      response_format: { type: 'xml' },
    });
    expect(badFormat.status).toBe(400);
    expect(badFormat.json.error).toMatchObject({ code: 'invalid_request' });
    expect((badFormat.json.error as { param: string }).param).toMatch(/^response_format/);
  });
});

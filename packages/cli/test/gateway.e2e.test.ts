import { createReadStream, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { probeLlamaCpp } from '@svc/node-agent';
import { createSineWav, createTinyGguf, startOpenAITestServer, type OpenAITestServer } from '@svc/node-agent/testing';
import { createTestStore, type TestStore } from '@svc/server/testing';
import { spawnSvc, until, waitForUrl, type SpawnedSvc } from './spawn.js';

const llama = await probeLlamaCpp();
if (!llama.available)
  console.log(`[svc test] SKIPPED the llama-cpp node of the process-level gateway test: ${llama.reason}`);

// npm test: one store: what these processes add to the in-process gateway tests is the wire (the openai client
// against svc serve and svc node); the same routes run on both stores in packages/server/src/modules/gateway/*.test.ts.

/**
 * The official openai client against real processes: `svc serve`, one `svc node` on an
 * OpenAI-compatible upstream (chat, embeddings, transcription, images) and, where llama.cpp
 * loads, one `svc node --gguf` running generated GGUF models in-process.
 */
describe('the gateway through the openai client, against svc serve and svc node processes', () => {
  let store: TestStore;
  let upstream: OpenAITestServer;
  let dir: string;
  let server: SpawnedSvc;
  let base = '';
  let buyerKey = '';
  let readOnlyKey = '';
  const nodes: SpawnedSvc[] = [];
  const client = (apiKey = buyerKey) => new OpenAI({ apiKey, baseURL: `${base}/v1`, maxRetries: 0, timeout: 60_000 });

  beforeAll(async () => {
    store = await createTestStore();
    upstream = await startOpenAITestServer();
    dir = mkdtempSync(join(tmpdir(), 'svc-gw-e2e-'));
    server = spawnSvc(['serve'], {
      SVC_DATA_DIR: store.dataDir,
      SVC_PORT: '0',
      SVC_LOG_LEVEL: 'warn',
      SVC_RATE_LIMIT_BURST: '60',
      SVC_RATE_LIMIT_RPS: '0.01',
      // A free tier of 40 cents: enough for these tests, and one 10-image request (30 cents) away from 402.
      SVC_FREE_TIER_CENTS: '40',
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
    // An operator key is minted by the owner's session: a buyer key may not grant operator.
    const operator = (await post('/api/v1/auth/signup', { email: 'op@gw.test', password: 'gateway e2e password' }))
      .token;
    const nodeKey = (await post('/api/v1/auth/api-keys', { label: 'node', scopes: ['operator'] }, operator)).api_key;
    buyerKey = (await post('/api/v1/auth/signup', { email: 'buyer@gw.test', password: 'gateway e2e password' }))
      .api_key;
    readOnlyKey = (await post('/api/v1/auth/api-keys', { label: 'ro', scopes: ['read-only'] }, buyerKey)).api_key;

    const start = async (name: string, args: string[]) => {
      const proc = spawnSvc(['node', '--server', base, '--data-dir', join(dir, name), '--name', name, ...args], {
        SVC_NODE_API_KEY: nodeKey,
      });
      nodes.push(proc);
      await until(
        `node ${name} registration`,
        async () => /registered (node_[a-z0-9]+)/.exec(proc.stdout())?.[1],
        90_000,
      );
    };
    await start('upstream', [
      '--country',
      'CA',
      '--upstream',
      upstream.url,
      '--model',
      'tinyllama',
      '--model',
      'all-MiniLM-L6-v2',
      '--model',
      'whisper-base',
      '--model',
      'sdxl-turbo',
    ]);
    if (llama.available) {
      const gguf = await createTinyGguf({ path: join(dir, 'chat.gguf'), kind: 'chat' });
      const embed = await createTinyGguf({ path: join(dir, 'embed.gguf'), kind: 'embedding' });
      await start('gguf', [
        '--country',
        'FR',
        '--gguf',
        `phi-4=${gguf.path}`,
        '--gguf',
        `all-MiniLM-L6-v2=${embed.path}`,
        '--concurrency',
        '1',
      ]);
    }
  }, 240_000);

  afterAll(async () => {
    for (const n of nodes) n.child.kill('SIGKILL');
    server.child.kill('SIGTERM');
    await server.exited;
    await upstream.close();
    rmSync(dir, { recursive: true, force: true });
    await store.drop();
  });

  it('models, chat (plain and streamed with usage), embeddings, transcription and images', async () => {
    const openai = client();
    expect((await openai.models.list()).data.map((m) => m.id)).toContain('tinyllama');
    const { data: chat, response } = await openai.chat.completions
      .create({ model: 'tinyllama', messages: [{ role: 'user', content: 'from a process' }] })
      .withResponse();
    expect(chat.choices[0]?.message.content).toBe('You said: from a process');
    expect(chat.usage?.total_tokens).toBeGreaterThan(0);
    expect(response.headers.get('x-svc-receipt')).toMatch(/^rcpt_/);
    expect(response.headers.get('x-svc-node')).toMatch(/^node_/);

    const stream = await openai.chat.completions.create({
      model: 'tinyllama',
      messages: [{ role: 'user', content: 'stream it' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let usage: OpenAI.CompletionUsage | undefined | null;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text).toBe('You said: stream it');
    expect(usage?.total_tokens).toBeGreaterThan(0);

    const embeddings = await openai.embeddings.create({ model: 'all-MiniLM-L6-v2', input: ['a', 'b'] });
    expect(embeddings.data.map((d) => d.embedding.length)).toEqual([384, 384]);

    const wav = join(dir, 'tone.wav');
    writeFileSync(wav, createSineWav({ seconds: 2 }));
    const transcript = await openai.audio.transcriptions.create({
      file: createReadStream(wav),
      model: 'whisper-base',
      response_format: 'verbose_json',
    });
    expect(transcript).toMatchObject({ duration: 2 });

    const image = await openai.images.generate({ model: 'sdxl-turbo', prompt: 'a receipt', n: 1, size: '256x256' });
    const url = image.data?.[0]?.url ?? '';
    const download = await fetch(url);
    expect(download.status).toBe(200);
    expect(download.headers.get('content-type')).toBe('image/png');
    const expired = new URL(url);
    expired.searchParams.set('expires', String(Math.floor(Date.now() / 1000) - 10));
    expect((await fetch(expired)).status).toBe(403);
  }, 120_000);

  it.skipIf(!llama.available)(
    'chat and embeddings on the llama-cpp node (generated GGUF), pinned to its country',
    async () => {
      const openai = client();
      const chat = await openai.chat.completions.create({
        model: 'phi-4',
        messages: [{ role: 'user', content: 'hi' }],
        max_tokens: 4,
        temperature: 0,
        strict_jurisdiction: 'FR',
      } as OpenAI.ChatCompletionCreateParamsNonStreaming);
      expect(chat.usage?.completion_tokens).toBe(4);
      expect((chat as unknown as { svc_node: { country: string } }).svc_node.country).toBe('FR');
      const embedded = await openai.embeddings.create({
        model: 'all-MiniLM-L6-v2',
        input: 'hello',
        strict_jurisdiction: 'FR',
      } as OpenAI.EmbeddingCreateParams);
      expect(embedded.data[0]?.embedding.length).toBe(384);
      const id = (embedded as unknown as { id: string }).id;
      const receipt = (await (
        await fetch(`${base}/api/v1/job/receipts/${id}`, { headers: { authorization: `Bearer ${buyerKey}` } })
      ).json()) as { receipts?: { metadata: Record<string, unknown> }[] };
      expect(receipt.receipts?.[0]?.metadata).toMatchObject({ engine: 'llama-cpp', country: 'FR' });
    },
    120_000,
  );

  it("the SDK's typed errors: 401, 403, 404, 402, 503 and 429", async () => {
    type ApiErr = InstanceType<typeof OpenAI.APIError>;
    const expectError = async (p: Promise<unknown>, type: new (...args: never[]) => ApiErr, status: number) => {
      const err = await p.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(type);
      expect((err as ApiErr).status).toBe(status);
      return err as ApiErr;
    };
    await expectError(client('svc_live_wrong').models.list(), OpenAI.AuthenticationError, 401);
    await expectError(
      client(readOnlyKey).chat.completions.create({ model: 'tinyllama', messages: [{ role: 'user', content: 'x' }] }),
      OpenAI.PermissionDeniedError,
      403,
    );
    await expectError(
      client().chat.completions.create({
        model: 'tinyllama',
        messages: [{ role: 'user', content: 'x' }],
        knowledge_base: 'kb_missing',
      } as OpenAI.ChatCompletionCreateParamsNonStreaming),
      OpenAI.NotFoundError,
      404,
    );
    // A new buyer has the 40-cent free tier: one 10-image request (30 cents) fits, the next cannot be held.
    const poor = (await (
      await fetch(`${base}/api/v1/auth/signup`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: 'poor@gw.test', password: 'gateway e2e password' }),
      })
    ).json()) as { api_key: string };
    const tenImages = () =>
      client(poor.api_key).images.generate({ model: 'sdxl-turbo', prompt: 'ten', n: 10, size: '256x256' });
    expect((await tenImages()).data).toHaveLength(10);
    const broke = await expectError(tenImages(), OpenAI.APIError, 402);
    expect(broke).toMatchObject({ code: 'insufficient_credits', type: 'insufficient_quota' });
    expect(broke.message).toMatch(
      /^402 insufficient credits: 10 cents available, \d+ cents needed; top up or lower the budget$/,
    );
    const none = await expectError(
      client().chat.completions.create({
        model: 'tinyllama',
        messages: [{ role: 'user', content: 'x' }],
        strict_jurisdiction: 'JP',
      } as OpenAI.ChatCompletionCreateParamsNonStreaming),
      OpenAI.InternalServerError,
      503,
    );
    // Under /v1/ the body is OpenAI's envelope (DESIGN.md section 5): the SDK reads our code and message.
    expect(none).toMatchObject({
      code: 'no_capacity',
      type: 'api_error',
      param: null,
      message: '503 no live node serves tinyllama in JP',
    });
    const unknown = await expectError(
      client().chat.completions.create({ model: 'gpt-4o', messages: [{ role: 'user', content: 'x' }] }),
      OpenAI.NotFoundError,
      404,
    );
    expect(unknown).toMatchObject({ code: 'model_not_found', type: 'invalid_request_error', param: 'model' });
    expect(unknown.message).toContain("The model 'gpt-4o' does not exist");
    // The read-only key's own bucket (60 requests, no refill to speak of) runs dry.
    const limited = await (async () => {
      for (let i = 0; i < 70; i++) await client(readOnlyKey).models.list();
    })().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(limited).toBeInstanceOf(OpenAI.RateLimitError);
  }, 120_000);
});

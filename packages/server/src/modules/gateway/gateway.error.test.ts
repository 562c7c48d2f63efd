import { holdCents } from './pricing.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI, { type APIError } from 'openai';
import {
  bearer,
  createKey,
  createTestApp,
  createTestNode,
  signUp,
  type TestApp,
  type TestBuyer,
} from '../../../test/harness.js';
import { newId } from '../../platform/ids.js';
import { prepareChat } from './chat.js';
import { openRequest, sweepStaleRequests } from './service.js';
import { startGatewayFixture, type GatewayFixture } from '../../../test/gateway-fixture.js';
import { audioSamples } from '../../../test/audio-samples.js';

/** OpenAI's name for the field at a JSON pointer: `/messages/0/role` -> `messages[0].role`. */
const paramAt = (path: string) =>
  path
    .slice(1)
    .replace(/\/(\d+)/g, '[$1]')
    .replace(/\//g, '.');
const chat = (extra: Record<string, unknown> = {}) => ({
  model: 'tinyllama',
  messages: [{ role: 'user', content: 'hi' }],
  ...extra,
});

describe('gateway request validation (before any node is involved)', () => {
  let t: TestApp;
  let buyer: TestBuyer;
  beforeAll(async () => {
    t = await createTestApp({ env: { SVC_RATE_LIMIT_BURST: '100000', SVC_ORG_RATE_LIMIT_BURST: '100000' } });
    buyer = await signUp(t.app);
  });
  afterAll(() => t.close());

  const post = (url: string, payload: unknown) =>
    t.app.inject({ method: 'POST', url, headers: bearer(buyer.apiKey), payload: payload as Record<string, unknown> });

  it.each([
    ['no messages', chat({ messages: [] }), '/messages'],
    ['an unknown role', chat({ messages: [{ role: 'function', content: 'x' }] }), '/messages/0/role'],
    [
      'a tool message without tool_call_id',
      chat({ messages: [{ role: 'tool', content: 'x' }] }),
      '/messages/0/tool_call_id',
    ],
    ['a null content on a user message', chat({ messages: [{ role: 'user', content: null }] }), '/messages/0/content'],
    ['a stop list of five', chat({ stop: ['a', 'b', 'c', 'd', 'e'] }), '/stop'],
    ['top_p above 1', chat({ top_p: 1.5 }), '/top_p'],
    ['tool_choice without tools', chat({ tool_choice: 'auto' }), '/tool_choice'],
    [
      'content parts instead of a string',
      chat({ messages: [{ role: 'user', content: [{ type: 'text', text: 'x' }] }] }),
      '/messages/0/content',
    ],
    ['temperature above 2', chat({ temperature: 2.01 }), '/temperature'],
    ['temperature below 0', chat({ temperature: -0.1 }), '/temperature'],
    ['max_tokens 0', chat({ max_tokens: 0 }), '/max_tokens'],
    ['max_tokens above 32768', chat({ max_tokens: 32_769 }), '/max_tokens'],
    ['a fractional max_tokens', chat({ max_tokens: 1.5 }), '/max_tokens'],
    ['a lower-case jurisdiction', chat({ jurisdiction: 'ca' }), '/jurisdiction'],
    ['a three-letter strict_jurisdiction', chat({ strict_jurisdiction: 'CAN' }), '/strict_jurisdiction'],
    ['requires_tee as a string', chat({ requires_tee: 'yes' }), '/requires_tee'],
    ['stream as a string', chat({ stream: 'true' }), '/stream'],
  ])('chat: 400 for %s, naming the field', async (_label, body, path) => {
    const res = await post('/v1/chat/completions', body);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({
      error: { type: 'invalid_request_error', code: 'invalid_request', param: paramAt(path) },
    });
    expect(res.json().error.message).toContain(path);
  });

  it.each([
    [
      '/v1/chat/completions',
      chat({ model: 'gpt-4' }),
      "The model 'gpt-4' does not exist in the catalogue; chat models: phi-4, svc-llama-3.2-3b, tinyllama (GET /v1/models)",
    ],
    [
      '/v1/chat/completions',
      chat({ model: 'all-MiniLM-L6-v2' }),
      "The model 'all-MiniLM-L6-v2' is an embeddings model, not a chat model",
    ],
    [
      '/v1/embeddings',
      { model: 'tinyllama', input: 'x' },
      "The model 'tinyllama' is a chat model, not an embeddings model",
    ],
    [
      '/v1/embeddings',
      { model: 'text-embedding-3-small', input: 'x' },
      "The model 'text-embedding-3-small' does not exist in the catalogue",
    ],
    [
      '/v1/images/generations',
      { model: 'dall-e-3', prompt: 'x' },
      "The model 'dall-e-3' does not exist in the catalogue",
    ],
    [
      '/v1/images/generations',
      { model: 'whisper-base', prompt: 'x' },
      "The model 'whisper-base' is a transcription model, not an image model",
    ],
  ])(
    '%s: 404 model_not_found for a model outside the catalogue or of another type (%#)',
    async (url, body, message) => {
      const res = await post(url, body);
      expect(res.statusCode).toBe(404);
      expect(res.json()).toMatchObject({
        error: { type: 'invalid_request_error', code: 'model_not_found', param: 'model' },
      });
      expect(res.json().error.message).toContain(message);
      expect(res.headers['x-request-id']).toBeTruthy();
    },
  );

  it("errors under /v1/ use OpenAI's envelope; /api/v1/ keeps ErrorResponse", async () => {
    const v1 = await t.app.inject({ method: 'GET', url: '/v1/models' });
    expect(v1.statusCode).toBe(401);
    expect(v1.json()).toEqual({
      error: { message: expect.any(String), type: 'authentication_error', param: null, code: 'unauthorized' },
    });
    const unknownRoute = await post('/v1/nowhere', {});
    expect(unknownRoute.json()).toEqual({
      error: { message: 'no route POST /v1/nowhere', type: 'invalid_request_error', param: null, code: 'not_found' },
    });
    const api = await t.app.inject({ method: 'GET', url: '/api/v1/marketplace/jobs' });
    expect(api.statusCode).toBe(401);
    expect(api.json()).toEqual({ code: 401, error: 'unauthorized', message: expect.any(String) });
    const badJson = await t.app.inject({
      method: 'POST',
      url: '/v1/chat/completions',
      headers: { ...bearer(buyer.apiKey), 'content-type': 'application/json' },
      payload: '{"model":',
    });
    expect(badJson.statusCode).toBe(400);
    expect(badJson.json().error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_request', param: null });
  });

  it('chat: ignores fields it does not know (OpenAI SDKs send them) and accepts nulls, then looks for a node', async () => {
    const res = await post(
      '/v1/chat/completions',
      chat({
        top_p: 0.9,
        user: 'u',
        n: 1,
        presence_penalty: 0,
        temperature: null,
        max_tokens: null,
        stream: null,
        seed: 7,
      }),
    );
    expect(res.statusCode).toBe(503);
    expect(res.json()).toEqual({
      error: { message: 'no live node serves tinyllama', type: 'api_error', param: null, code: 'no_capacity' },
    });
  });

  it('chat: an unknown knowledge_base is 404', async () => {
    const res = await post('/v1/chat/completions', chat({ knowledge_base: 'kb_anything' }));
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({
      error: {
        message: 'knowledge base kb_anything not found',
        type: 'invalid_request_error',
        param: null,
        code: 'not_found',
      },
    });
  });

  it('embeddings: input and dimensions rules', async () => {
    const cases: [unknown, string][] = [
      [{ model: 'all-MiniLM-L6-v2', input: Array.from({ length: 2049 }, () => 'x') }, '/input'],
      [{ model: 'all-MiniLM-L6-v2', input: [] }, '/input'],
      [{ model: 'all-MiniLM-L6-v2', input: [1, 2] }, '/input'],
      [{ model: 'all-MiniLM-L6-v2', input: '' }, '/input'],
      [{ model: 'all-MiniLM-L6-v2', input: 'x', dimensions: 768 }, '/dimensions'],
      [{ model: 'all-MiniLM-L6-v2', input: 'x', encoding_format: 'int8' }, '/encoding_format'],
    ];
    for (const [body, path] of cases) {
      const res = await post('/v1/embeddings', body);
      expect(`${path}: ${res.statusCode}`).toBe(`${path}: 400`);
      expect(res.json().error.param).toBe(path.slice(1));
    }
    const ok = await post('/v1/embeddings', {
      model: 'all-MiniLM-L6-v2',
      input: Array.from({ length: 2048 }, () => 'x'),
      dimensions: 384,
    });
    expect(ok.statusCode).toBe(503);
  });

  it('images: n 1..10 and size WxH with each side 64..1024', async () => {
    const cases: [unknown, string][] = [
      [{ model: 'sdxl-turbo', prompt: 'x', n: 11 }, '/n'],
      [{ model: 'sdxl-turbo', prompt: 'x', n: 0 }, '/n'],
      [{ model: 'sdxl-turbo', prompt: 'x', size: '2048x1024' }, '/size'],
      [{ model: 'sdxl-turbo', prompt: 'x', size: '32x64' }, '/size'],
      [{ model: 'sdxl-turbo', prompt: 'x', size: 'big' }, '/size'],
      [{ model: 'sdxl-turbo', prompt: '' }, '/prompt'],
    ];
    for (const [body, path] of cases) {
      const res = await post('/v1/images/generations', body);
      expect(`${path}: ${res.statusCode}`).toBe(`${path}: 400`);
      expect(res.json().error.param).toBe(path.slice(1));
    }
    expect(
      (await post('/v1/images/generations', { model: 'sdxl-turbo', prompt: 'x', n: 10, size: '64x1024' })).statusCode,
    ).toBe(503);
  });

  async function upload(fields: Record<string, string>, file?: { bytes: Buffer; name: string }) {
    const form = new FormData();
    for (const [k, v] of Object.entries(fields)) form.set(k, v);
    if (file) form.set('file', new Blob([file.bytes]), file.name);
    const encoded = new Response(form);
    return t.app.inject({
      method: 'POST',
      url: '/v1/audio/transcriptions',
      headers: { ...bearer(buyer.apiKey), 'content-type': encoded.headers.get('content-type') ?? '' },
      payload: Buffer.from(await encoded.arrayBuffer()),
    });
  }
  const wavHeader = () => {
    const b = Buffer.alloc(64);
    b.write('RIFF', 0, 'latin1');
    b.write('WAVE', 8, 'latin1');
    return b;
  };

  it('transcriptions: the form fields, the content sniffing (415) and the 25 MiB limit (413)', async () => {
    expect((await upload({ model: 'whisper-base' })).json()).toMatchObject({
      error: { code: 'invalid_request', param: 'file' },
    });
    expect((await upload({ model: 'whisper-large' }, { bytes: wavHeader(), name: 'a.wav' })).json()).toMatchObject({
      error: { code: 'model_not_found', type: 'invalid_request_error', param: 'model' },
    });
    expect(
      (await upload({ model: 'whisper-base', response_format: 'srt' }, { bytes: wavHeader(), name: 'a.wav' })).json(),
    ).toMatchObject({ error: { code: 'invalid_request', param: 'response_format' } });
    expect(
      (await upload({ model: 'whisper-base', language: 'English' }, { bytes: wavHeader(), name: 'a.wav' })).json(),
    ).toMatchObject({ error: { code: 'invalid_request', param: 'language' } });
    const png = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex');
    expect((await upload({ model: 'whisper-base' }, { bytes: png, name: 'speech.mp3' })).json()).toMatchObject({
      error: { code: 'unsupported_media_type', type: 'invalid_request_error' },
    });
    for (const { format, bytes } of audioSamples()) {
      // Measured: it gets as far as routing (no node here).
      expect(`${format}: ${(await upload({ model: 'whisper-base' }, { bytes, name: 'x.bin' })).statusCode}`).toBe(
        `${format}: 503`,
      );
    }
    // A header alone holds no audio to measure.
    expect((await upload({ model: 'whisper-base' }, { bytes: wavHeader(), name: 'a.wav' })).statusCode).toBe(415);
    const big = Buffer.alloc(25 * 1024 * 1024 + 1);
    wavHeader().copy(big);
    const tooBig = await upload({ model: 'whisper-base' }, { bytes: big, name: 'long.wav' });
    expect(tooBig.statusCode).toBe(413);
    expect(tooBig.json()).toMatchObject({ error: { code: 'payload_too_large', type: 'invalid_request_error' } });
    const json = await post('/v1/audio/transcriptions', { model: 'whisper-base' });
    expect(json.statusCode).toBe(415);
  });
});

describe('requests abandoned by a stopped instance', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

  it('are ended by the sweep: work cancelled, its credit back, nothing held or charged', async () => {
    const buyer = await signUp(t.app);
    await createTestNode(t.app, await createKey(t.app, await signUp(t.app), ['operator']), { models: ['tinyllama'] });
    const call = prepareChat({ model: 'tinyllama', messages: [{ role: 'user', content: 'hello' }] });
    const workId = newId('wrk');
    await openRequest(
      t.ctx,
      { kind: 'key', orgId: buyer.orgId, buyerId: buyer.buyerId, role: 'owner', scopes: ['buyer'] },
      call,
      workId,
    );
    // Its maximum cost is taken from this instance's reservation in memory: no hold row.
    expect((await t.ctx.ledger.balance(buyer.orgId)).held_cents).toBe(0);
    const taken = t.ctx.reservations.unused(buyer.orgId);
    expect(await sweepStaleRequests(t.ctx)).toBe(0);
    await t.ctx.db.query("UPDATE gateway_requests SET created_at = now() - interval '1 hour' WHERE id = $1", [call.id]);
    expect(await sweepStaleRequests(t.ctx)).toBe(1);
    expect(await sweepStaleRequests(t.ctx)).toBe(0);
    const { rows } = await t.ctx.db.query<{ status: string; work_status: string }>(
      'SELECT g.status, w.status AS work_status FROM gateway_requests g JOIN work_items w ON w.id = g.work_id WHERE g.id = $1',
      [call.id],
    );
    expect(rows[0]).toEqual({ status: 'timeout', work_status: 'cancelled' });
    expect(t.ctx.reservations.unused(buyer.orgId) - taken).toBe(holdCents(call.maxMicro));
    const ledger = await t.ctx.db.query('SELECT tx_type FROM credit_transactions WHERE ref = $1', [call.id]);
    expect(ledger.rows).toEqual([]);
  });
});

describe('gateway credits and rate limits through the openai client', () => {
  let f: GatewayFixture;
  beforeAll(async () => {
    // No free tier, and a per-key burst of 4 requests.
    f = await startGatewayFixture({
      env: { SVC_FREE_TIER_CENTS: '0', SVC_RATE_LIMIT_BURST: '4', SVC_RATE_LIMIT_RPS: '0.01' },
    });
    await f.addNode({ country: 'CA' });
  });
  afterAll(() => f.close());

  it('402 when the balance cannot cover the maximum cost; 429 once the key is over its rate', async () => {
    const client = f.openai();
    const broke = await client.chat.completions
      .create({ model: 'tinyllama', messages: [{ role: 'user', content: 'hi' }] })
      .catch((e: unknown) => e);
    expect(broke).toBeInstanceOf(OpenAI.APIError);
    expect(broke).toMatchObject({ status: 402, code: 'insufficient_credits', type: 'insufficient_quota' });
    expect((broke as APIError).message).toMatch(/^402 insufficient credits: 0 cents available/);
    const limited = await (async () => {
      for (let i = 0; i < 10; i++) await client.models.list();
    })().catch((e: unknown) => e);
    expect(limited).toBeInstanceOf(OpenAI.RateLimitError);
    expect((limited as APIError).headers?.get('retry-after')).toMatch(/^\d+$/);
  });
});

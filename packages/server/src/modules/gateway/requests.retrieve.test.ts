import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  bearer,
  createKey,
  createTestApp,
  createTestNode,
  signUp,
  type TestApp,
  type TestBuyer,
  type TestNode,
} from '../../../test/harness.js';

describe('GET /api/v1/gateway/requests/{id}: an answer can be fetched again', () => {
  let t: TestApp;
  let alice: TestBuyer;
  let node: TestNode;
  beforeAll(async () => {
    t = await createTestApp();
    alice = await signUp(t.app);
    node = await createTestNode(t.app, await createKey(t.app, await signUp(t.app), ['operator']), {
      models: ['tinyllama', 'sdxl-turbo'],
    });
  });
  afterAll(() => t.close());

  /** Runs one gateway request through the test node, which answers `output` metered `units`. */
  async function served(url: string, payload: Record<string, unknown>, output: unknown, units: number) {
    const pending = t.app.inject({ method: 'POST', url, headers: bearer(alice.apiKey), payload });
    const [work] = await node.poll({ waitMs: 5_000 });
    if (!work) throw new Error('no work reached the node');
    expect((await node.complete(work, JSON.stringify(output), units)).statusCode).toBe(200);
    const res = await pending;
    expect(res.statusCode).toBe(200);
    return res.json();
  }

  it('a chat completion: its record, usage, charge, receipt and the completion body', async () => {
    const answer = await served(
      '/v1/chat/completions',
      { model: 'tinyllama', messages: [{ role: 'user', content: 'remember me' }] },
      { content: 'I will', finish_reason: 'stop' },
      7,
    );
    const res = await t.app.inject({
      method: 'GET',
      url: `/api/v1/gateway/requests/${answer.id}`,
      headers: bearer(alice.apiKey),
    });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({
      id: answer.id,
      type: 'chat',
      model: 'tinyllama',
      status: 'completed',
      node_id: node.nodeId,
      receipt_id: answer.svc_receipt_id,
      stream: false,
    });
    expect(body.charged_cents).toBeGreaterThanOrEqual(0);
    expect(body.usage).toEqual(expect.objectContaining({ completion_tokens: expect.any(Number) }));
    expect(body.result).toMatchObject({
      id: answer.id,
      object: 'chat.completion',
      model: 'tinyllama',
      choices: [{ index: 0, message: { role: 'assistant', content: 'I will' }, finish_reason: 'stop' }],
    });
    expect(body.result.usage).toEqual(answer.usage);
    // read-only keys read it; write-only keys do not
    const readOnly = await createKey(t.app, alice, ['read-only']);
    expect(
      (
        await t.app.inject({ method: 'GET', url: `/api/v1/gateway/requests/${answer.id}`, headers: bearer(readOnly) })
      ).json().result.choices[0].message.content,
    ).toBe('I will');
    const writeOnly = await createKey(t.app, alice, ['write-only']);
    expect(
      (await t.app.inject({ method: 'GET', url: `/api/v1/gateway/requests/${answer.id}`, headers: bearer(writeOnly) }))
        .statusCode,
    ).toBe(403);
  });

  it('images come back as freshly presigned URLs that download the bytes', async () => {
    const png = Buffer.from('89504e470d0a1a0a0000000d4948445200000001', 'hex');
    const answer = await served(
      '/v1/images/generations',
      { model: 'sdxl-turbo', prompt: 'a fox', size: '64x64', response_format: 'b64_json' },
      { images: [{ content_type: 'image/png', b64_json: png.toString('base64') }] },
      1,
    );
    expect(answer.data[0].b64_json).toBe(png.toString('base64'));
    const body = (
      await t.app.inject({ method: 'GET', url: `/api/v1/gateway/requests/${answer.id}`, headers: bearer(alice.apiKey) })
    ).json();
    expect(body).toMatchObject({ type: 'image', status: 'completed', charged_cents: 3 });
    const url = new URL(body.result.data[0].url as string);
    const file = await t.app.inject({ method: 'GET', url: `${url.pathname}${url.search}` });
    expect(file.statusCode).toBe(200);
    expect(file.headers['content-type']).toBe('image/png');
    expect(file.rawPayload.equals(png)).toBe(true);
  });

  it("another organization's request is 404, as is an unknown id", async () => {
    const answer = await served(
      '/v1/chat/completions',
      { model: 'tinyllama', messages: [{ role: 'user', content: 'mine' }] },
      { content: 'secret answer' },
      3,
    );
    const bob = await signUp(t.app);
    const res = await t.app.inject({
      method: 'GET',
      url: `/api/v1/gateway/requests/${answer.id}`,
      headers: bearer(bob.apiKey),
    });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ code: 404, error: 'not_found', message: `gateway request ${answer.id} not found` });
    expect(res.body).not.toContain('secret answer');
    expect(
      (
        await t.app.inject({
          method: 'GET',
          url: '/api/v1/gateway/requests/chatcmpl-nope',
          headers: bearer(alice.apiKey),
        })
      ).statusCode,
    ).toBe(404);
  });
});

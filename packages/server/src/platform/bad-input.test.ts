import { sha256Hex, signHex } from '@svc/protocol';
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
} from '../../test/harness.js';
import { unsafeJson } from './input-guard.js';
import { boundNumbers } from './validation.js';

describe('bad input is a 4xx in the error shape, never a 500', () => {
  let t: TestApp;
  let alice: TestBuyer;
  let node: TestNode;
  beforeAll(async () => {
    t = await createTestApp({ env: { SVC_LOG_LEVEL: 'warn' } });
    alice = await signUp(t.app);
    node = await createTestNode(t.app, await createKey(t.app, alice, ['operator']), { models: [] });
  });
  afterAll(() => t.close());

  const post = (url: string, payload: unknown) =>
    t.app.inject({ method: 'POST', url, headers: bearer(alice.apiKey), payload: payload as Record<string, unknown> });
  const expect400 = (res: { statusCode: number; json(): unknown }, path?: string) => {
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: 400, error: 'invalid_request' });
    if (path) expect((res.json() as { details: { path: string }[] }).details[0]?.path).toBe(path);
  };

  it('NUL bytes in names, labels, inline_text, runner_args and search queries', async () => {
    expect400(await post('/api/v1/auth/api-keys', { label: 'a\u0000b', scopes: ['read-only'] }), '/label');
    expect400(await post('/api/v1/knowledge-bases', { name: 'kb\u0000' }), '/name');
    expect400(
      await post('/api/v1/marketplace/jobs', {
        kind: 5,
        budget: 0.5,
        max_price_per_unit: 0.0001,
        currency: 'CAD',
        runner_args: ['echo', 'x\u0000y'],
      }),
      '/runner_args/1',
    );
    expect400(
      await post('/api/v1/marketplace/jobs', {
        kind: 1,
        budget: 0.5,
        max_price_per_unit: 0.0001,
        currency: 'CAD',
        inline_text: '\u0000',
      }),
      '/inline_text',
    );
    expect400(
      await post('/api/v1/knowledge-bases/kb_00000000000000000000000000/search', { query: 'where\u0000' }),
      '/query',
    );
    // a lone surrogate cannot be stored in jsonb either; a key holding NUL is refused like a value
    expect400(await post('/api/v1/auth/api-keys', { label: 'x\ud800', scopes: ['read-only'] }), '/label');
    expect400(await post('/api/v1/auth/api-keys', { 'a\u0000': 1 }));
  });

  it('NUL in a query string or path', async () => {
    for (const url of [
      '/api/v1/marketplace/jobs?status=a%00b',
      '/api/v1/knowledge-bases?x=%00',
      '/api/v1/marketplace/jobs/job%00x',
      '/api/v1/gateway/requests/%00',
    ]) {
      expect400(await t.app.inject({ method: 'GET', url, headers: bearer(alice.apiKey) }));
    }
  });

  it('offset=1e20 (and a huge limit) on every list is a 400 naming the bound', async () => {
    const lists = t.app.routeTable.filter(
      (r) => r.method === 'GET' && !r.url.includes(':') && !r.hidden && r.auth && 'permission' in r.auth,
    );
    expect(lists.length).toBeGreaterThan(10);
    const seen: string[] = [];
    for (const route of lists) {
      const res = await t.app.inject({ method: 'GET', url: `${route.url}?offset=1e20`, headers: bearer(alice.apiKey) });
      expect(res.statusCode, `${route.url}: ${res.body}`).toBeLessThan(500);
      if (res.statusCode === 400 && res.body.includes('/offset')) seen.push(route.url);
    }
    expect(seen).toEqual(
      expect.arrayContaining([
        '/api/v1/marketplace/jobs',
        '/api/v1/gateway/requests',
        '/api/v1/billing/transactions',
        '/api/v1/knowledge-bases',
      ]),
    );
    const res = await t.app.inject({
      method: 'GET',
      url: '/api/v1/gateway/requests?offset=1e20',
      headers: bearer(alice.apiKey),
    });
    expect(res.json().message).toBe('invalid query: /offset must be <= 2147483647');
  });

  it('broken multipart on /v1/audio/transcriptions: no boundary, truncated part, boundary over 256 characters', async () => {
    const form = (b: string) =>
      `--${b}\r\nContent-Disposition: form-data; name="model"\r\n\r\nwhisper-base\r\n--${b}\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\nContent-Type: audio/wav\r\n\r\nRIFF....\r\n--${b}--\r\n`;
    const cases: [string, string][] = [
      ['multipart/form-data', form('b')],
      ['multipart/form-data; boundary=b', form('b').slice(0, 60)],
      [`multipart/form-data; boundary=${'q'.repeat(300)}`, form('q'.repeat(300))],
    ];
    for (const [contentType, body] of cases) {
      const res = await t.app.inject({
        method: 'POST',
        url: '/v1/audio/transcriptions',
        headers: { ...bearer(alice.apiKey), 'content-type': contentType },
        payload: body,
      });
      expect(res.statusCode, `${contentType.slice(0, 40)}: ${res.body}`).toBeGreaterThanOrEqual(400);
      expect(res.statusCode).toBeLessThan(500);
      // Under /v1/ errors use OpenAI's envelope (DESIGN.md section 5).
      expect(res.json()).toMatchObject({
        error: { message: expect.any(String), type: 'invalid_request_error', code: expect.any(String) },
      });
    }
  });

  it('a node timestamp with a leading zero is refused as unauthenticated (401)', async () => {
    // Signed by hand: the protocol's own signing string refuses such a timestamp.
    const timestamp = `0${Date.now()}`;
    const body = JSON.stringify({ load: 0 });
    const signature = signHex(
      Buffer.from(`SVC-NODE-REQ-v1\nPOST\n/api/v1/node/heartbeat\n${timestamp}\n${sha256Hex(body)}`),
      node.privateKey,
    );
    const res = await t.app.inject({
      method: 'POST',
      url: '/api/v1/node/heartbeat',
      headers: {
        'content-type': 'application/json',
        'x-svc-node': node.nodeId,
        'x-svc-timestamp': timestamp,
        'x-svc-signature': signature,
      },
      payload: body,
    });
    expect(res.statusCode).toBe(401);
    expect(res.json()).toMatchObject({ code: 401, error: 'unauthorized' });
    expect(res.json().message).toContain('canonical');
  });

  it('a heartbeat load too small for the real column (a denormal double) is stored, not a 500', async () => {
    expect((await node.call('POST', '/api/v1/node/heartbeat', { load: 2.148421850046612e-237 })).statusCode).toBe(200);
  });

  it('receipt metadata nested 10,000 deep is a 400 naming the depth limit', async () => {
    const deep = `${'{"a":'.repeat(10_000)}1${'}'.repeat(10_000)}`;
    const raw = `{"job_id":"x","pubkey":"${'0'.repeat(64)}","result_hash":"${'0'.repeat(64)}","signature":"${'0'.repeat(128)}","metering_units":1,"metadata":${deep}}`;
    const res = await node.call('POST', '/api/v1/node/receipt', JSON.parse(raw.replace(deep, '{}')) as unknown);
    expect(res.statusCode).not.toBe(500);
    const signedDeep = await t.app.inject({
      method: 'POST',
      url: '/api/v1/node/receipt',
      headers: { 'content-type': 'application/json' },
      payload: raw,
    });
    expect400(signedDeep);
    expect(signedDeep.json().message).toMatch(/nested too deep \(more than 64 levels/);
  });

  it('the guards as pure functions', () => {
    expect(unsafeJson({ a: [{ b: 'x\u0000' }] })).toEqual({
      path: '/a/0/b',
      message: 'must not contain NUL characters (U+0000)',
    });
    expect(unsafeJson({ ok: ['é', '😀'] })).toBeUndefined();
    expect(unsafeJson(JSON.parse('['.repeat(100_000) + ']'.repeat(100_000)))?.message).toMatch(/nested too deep/);
    expect(
      boundNumbers(
        { type: 'object', properties: { n: { type: 'integer', minimum: 0 }, m: { type: 'integer', maximum: 5 } } },
        10,
      ),
    ).toEqual({
      type: 'object',
      properties: { n: { type: 'integer', minimum: 0, maximum: 10 }, m: { type: 'integer', maximum: 5, minimum: -10 } },
    });
  });
});

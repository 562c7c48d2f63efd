import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  bearer,
  createKey,
  createTestApp,
  eventually,
  signUp,
  type TestApp,
  type TestBuyer,
} from '../../../test/harness.js';

describe('API keys', () => {
  let t: TestApp;
  let alice: TestBuyer;
  let bob: TestBuyer;
  beforeAll(async () => {
    t = await createTestApp();
    alice = await signUp(t.app);
    bob = await signUp(t.app);
  });
  afterAll(() => t.close());

  it('returns the full key once, then only records; stores only an HMAC of it', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/api/v1/auth/api-keys',
      headers: bearer(alice.apiKey),
      payload: { name: 'ci runner', scopes: ['read-only', 'jobs:write'] },
    });
    expect(res.statusCode).toBe(201);
    const { api_key, key } = res.json();
    expect(key).toMatchObject({
      label: 'ci runner',
      scopes: ['read-only', 'jobs:write'],
      hash_alg: 'hmac-sha256-v1',
      last_used_at: null,
      revoked_at: null,
    });
    expect(api_key.startsWith(`${key.prefix}_`)).toBe(true);
    const list = await t.app.inject({ method: 'GET', url: '/api/v1/auth/api-keys', headers: bearer(alice.apiKey) });
    expect(list.body).not.toContain(api_key.slice(key.prefix.length + 1));
    expect(list.json().keys.map((k: { key_id: string }) => k.key_id)).toContain(key.key_id);
    const { rows } = await t.ctx.db.query<{ hash: string }>('SELECT hash FROM api_keys WHERE id = $1', [key.key_id]);
    expect(rows[0]?.hash).toMatch(/^[0-9a-f]{64}$/);
    expect(JSON.stringify(rows)).not.toContain(api_key.slice(key.prefix.length + 1));
    expect(t.logs.text()).not.toContain(api_key.slice(key.prefix.length + 1));
  });

  it('records last use', async () => {
    const key = await createKey(t.app, alice, ['buyer']);
    await t.app.inject({ method: 'GET', url: '/api/v1/auth/me', headers: bearer(key) });
    // The use is recorded after the answer: wait for it to land.
    const record = await eventually(async () => {
      const list = (
        await t.app.inject({ method: 'GET', url: '/api/v1/auth/api-keys', headers: bearer(alice.apiKey) })
      ).json();
      const found = list.keys.find((k: { prefix: string; last_used_at: string | null }) => key.startsWith(k.prefix));
      return found?.last_used_at ? (found as { last_used_at: string }) : undefined;
    });
    expect(Date.parse(record.last_used_at)).toBeGreaterThan(Date.now() - 60_000);
  });

  it('a revoked key fails with 401 on the very next request', async () => {
    const key = await createKey(t.app, alice, ['buyer']);
    const keyId = key.split('_')[2];
    expect((await t.app.inject({ method: 'GET', url: '/api/v1/auth/me', headers: bearer(key) })).statusCode).toBe(200);
    const revoke = await t.app.inject({
      method: 'POST',
      url: `/api/v1/auth/api-keys/${keyId}/revoke`,
      headers: bearer(alice.apiKey),
      payload: { reason: 'leaked in a log' },
    });
    expect(revoke.json()).toEqual({ message: `API key ${keyId} revoked` });
    expect((await t.app.inject({ method: 'GET', url: '/api/v1/auth/me', headers: bearer(key) })).statusCode).toBe(401);
    expect(
      (await t.app.inject({ method: 'GET', url: '/api/v1/auth/me', headers: { 'x-api-key': key } })).statusCode,
    ).toBe(401);
    const list = (
      await t.app.inject({ method: 'GET', url: '/api/v1/auth/api-keys', headers: bearer(alice.apiKey) })
    ).json();
    expect(list.keys.find((k: { key_id: string }) => k.key_id === keyId)).toMatchObject({
      revoked_reason: 'leaked in a log',
    });
    const again = await t.app.inject({
      method: 'POST',
      url: `/api/v1/auth/api-keys/${keyId}/revoke`,
      headers: bearer(alice.apiKey),
      payload: { reason: 'twice' },
    });
    expect(again.statusCode).toBe(409);
  });

  it("another organization's keys are invisible and cannot be revoked (404)", async () => {
    const key = await createKey(t.app, alice, ['buyer']);
    const keyId = key.split('_')[2];
    const list = (
      await t.app.inject({ method: 'GET', url: '/api/v1/auth/api-keys', headers: bearer(bob.apiKey) })
    ).json();
    expect(list.keys.every((k: { buyer_id: string }) => k.buyer_id === bob.buyerId)).toBe(true);
    const revoke = await t.app.inject({
      method: 'POST',
      url: `/api/v1/auth/api-keys/${keyId}/revoke`,
      headers: bearer(bob.apiKey),
      payload: { reason: 'malice' },
    });
    expect(revoke.statusCode).toBe(404);
    expect((await t.app.inject({ method: 'GET', url: '/api/v1/auth/me', headers: bearer(key) })).statusCode).toBe(200);
  });

  it('refuses unknown scopes with a detail naming each, and a tampered key', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/api/v1/auth/api-keys',
      headers: bearer(alice.apiKey),
      payload: { scopes: ['buyer', 'root', 'jobs:delete'] },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().details).toEqual([
      { path: '/scopes/1', message: "unknown scope 'root'" },
      { path: '/scopes/2', message: "unknown scope 'jobs:delete'" },
    ]);
    const tampered = alice.apiKey.slice(0, -1) + (alice.apiKey.endsWith('0') ? '1' : '0');
    expect((await t.app.inject({ method: 'GET', url: '/api/v1/auth/me', headers: bearer(tampered) })).statusCode).toBe(
      401,
    );
  });

  it('a key whose scopes lack the permission gets 403 insufficient_scope', async () => {
    const readOnly = await createKey(t.app, alice, ['read-only']);
    const res = await t.app.inject({
      method: 'POST',
      url: '/api/v1/auth/api-keys',
      headers: bearer(readOnly),
      payload: {},
    });
    expect(res.statusCode).toBe(403);
    expect(res.json().error).toBe('insufficient_scope');
  });
});

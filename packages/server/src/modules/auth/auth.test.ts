import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createTestApp, signUp, type TestApp } from '../../../test/harness.js';

describe('sign-up, login, sessions', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ env: { SVC_LOGIN_ATTEMPTS_BURST: '3' } });
  });
  afterAll(() => t.close());

  it('sign-up creates the buyer, an owned organization, a buyer key, a session and the free tier', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/api/v1/auth/signup',
      payload: { email: 'Ada@Example.TEST', password: 'analytical engine', name: 'Ada' },
    });
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(body.email).toBe('ada@example.test');
    expect(body.api_key).toMatch(/^svc_live_[a-z0-9]{20}_[0-9a-f]{64}$/);
    expect(body.organization).toMatchObject({ name: "Ada's organization", role: 'owner' });
    const me = await t.app.inject({ method: 'GET', url: '/api/v1/auth/me', headers: bearer(body.api_key) });
    expect(me.json()).toEqual({
      buyer_id: body.buyer_id,
      email: 'ada@example.test',
      name: 'Ada',
      organization: body.organization,
    });
    const viaToken = await t.app.inject({ method: 'GET', url: '/api/v1/auth/me', headers: bearer(body.token) });
    expect(viaToken.json().buyer_id).toBe(body.buyer_id);
    const viaHeader = await t.app.inject({
      method: 'GET',
      url: '/api/v1/auth/me',
      headers: { 'x-api-key': body.api_key },
    });
    expect(viaHeader.statusCode).toBe(200);
    const keys = await t.app.inject({ method: 'GET', url: '/api/v1/auth/api-keys', headers: bearer(body.api_key) });
    expect(keys.json().keys).toHaveLength(1);
    expect(keys.json().keys[0]).toMatchObject({
      scopes: ['buyer'],
      hash_alg: 'hmac-sha256-v1',
      prefix: body.api_key.slice(0, 29),
    });
    const { rows } = await t.ctx.db.query<{ tx_type: string; amount_cents: number }>(
      'SELECT tx_type, amount_cents FROM credit_transactions WHERE org_id = $1',
      [body.organization.id],
    );
    expect(rows).toEqual([{ tx_type: 'free_tier', amount_cents: 500 }]);
  });

  it('refuses a second sign-up with the same email, whatever its case (409)', async () => {
    await signUp(t.app, { email: 'dup@example.test' });
    const res = await t.app.inject({
      method: 'POST',
      url: '/api/v1/auth/signup',
      payload: { email: 'DUP@example.test', password: 'another long password' },
    });
    expect(res.statusCode).toBe(409);
    expect(res.json().error).toBe('conflict');
  });

  it('validates email and password length', async () => {
    const short = await t.app.inject({
      method: 'POST',
      url: '/api/v1/auth/signup',
      payload: { email: 'short@example.test', password: 'tiny' },
    });
    expect(short.statusCode).toBe(400);
    expect(short.json().details).toEqual([{ path: '/password', message: 'must be at least 10 characters' }]);
    const bad = await t.app.inject({
      method: 'POST',
      url: '/api/v1/auth/signup',
      payload: { email: 'not-an-email', password: 'long enough password' },
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().details[0].path).toBe('/email');
  });

  it('logs in with the password, and logout ends that session at once', async () => {
    const buyer = await signUp(t.app, { email: 'lin@example.test' });
    const wrong = await t.app.inject({
      method: 'POST',
      url: '/api/v1/auth/login',
      payload: { email: 'lin@example.test', password: 'not the password' },
    });
    expect(wrong.statusCode).toBe(401);
    expect(wrong.json().message).toBe('invalid email or password');
    const unknown = await t.app.inject({
      method: 'POST',
      url: '/api/v1/auth/login',
      payload: { email: 'nobody@example.test', password: 'not the password' },
    });
    expect(unknown.json().message).toBe('invalid email or password');
    const ok = await t.app.inject({
      method: 'POST',
      url: '/api/v1/auth/login',
      payload: { email: 'LIN@example.test', password: buyer.password },
    });
    expect(ok.statusCode).toBe(200);
    expect(ok.json().api_key).toBeUndefined();
    const token = ok.json().token as string;
    expect((await t.app.inject({ method: 'GET', url: '/api/v1/auth/me', headers: bearer(token) })).statusCode).toBe(
      200,
    );
    expect((await t.app.inject({ method: 'POST', url: '/api/v1/auth/logout', headers: bearer(token) })).json()).toEqual(
      { message: 'logged out' },
    );
    const after = await t.app.inject({ method: 'GET', url: '/api/v1/auth/me', headers: bearer(token) });
    expect(after.statusCode).toBe(401);
    expect(after.headers['www-authenticate']).toBe('Bearer realm="svc"');
    // The sign-up session is a different session and still works.
    expect(
      (await t.app.inject({ method: 'GET', url: '/api/v1/auth/me', headers: bearer(buyer.token) })).statusCode,
    ).toBe(200);
  });

  it('refuses expired, forged and malformed session tokens', async () => {
    const buyer = await signUp(t.app);
    const [header, payload] = buyer.token.split('.');
    const forged = `${header}.${payload}.${'A'.repeat(43)}`;
    expect((await t.app.inject({ method: 'GET', url: '/api/v1/auth/me', headers: bearer(forged) })).statusCode).toBe(
      401,
    );
    expect((await t.app.inject({ method: 'GET', url: '/api/v1/auth/me', headers: bearer('garbage') })).statusCode).toBe(
      401,
    );
    await t.ctx.db.query("UPDATE sessions SET expires_at = now() - interval '1 second' WHERE buyer_id = $1", [
      buyer.buyerId,
    ]);
    expect(
      (await t.app.inject({ method: 'GET', url: '/api/v1/auth/me', headers: bearer(buyer.token) })).statusCode,
    ).toBe(401);
    // A session token is not an API key: X-API-Key takes keys only.
    const other = await signUp(t.app);
    expect(
      (await t.app.inject({ method: 'GET', url: '/api/v1/auth/me', headers: { 'x-api-key': other.token } })).statusCode,
    ).toBe(401);
  });

  it('rate limits login attempts per email (429 with Retry-After)', async () => {
    const buyer = await signUp(t.app, { email: 'brute@example.test' });
    const attempt = () =>
      t.app.inject({
        method: 'POST',
        url: '/api/v1/auth/login',
        payload: { email: 'brute@example.test', password: 'guess guess guess' },
        remoteAddress: `198.51.100.${Math.floor(Math.random() * 200)}`,
      });
    for (let i = 0; i < 3; i++) expect((await attempt()).statusCode).toBe(401);
    const limited = await attempt();
    expect(limited.statusCode).toBe(429);
    expect(limited.json().error).toBe('rate_limited');
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    // Even the right password waits now.
    const right = await t.app.inject({
      method: 'POST',
      url: '/api/v1/auth/login',
      payload: { email: 'brute@example.test', password: buyer.password },
    });
    expect(right.statusCode).toBe(429);
  });

  it('never shows a key or password in the logs', async () => {
    const buyer = await signUp(t.app, { password: 'a very secret passphrase' });
    await t.app.inject({ method: 'GET', url: '/api/v1/auth/me', headers: bearer(buyer.apiKey) });
    await t.app.inject({ method: 'GET', url: '/api/v1/auth/me', headers: { 'x-api-key': buyer.apiKey } });
    const logs = t.logs.text();
    expect(logs).not.toContain(buyer.apiKey.slice(30));
    expect(logs).not.toContain('a very secret passphrase');
    expect(logs).not.toContain(buyer.token);
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createKey, createTestApp, createTestNode, signUp, type TestApp } from '../../test/harness.js';
import { presignFileUrl } from '../modules/gateway/files.js';
import { redactQuery } from './log-redact.js';

describe('redactQuery', () => {
  it.each([
    ['/v1/files/a.png?expires=1795000000&signature=ab12cd', '/v1/files/a.png?expires=1795000000&signature=[redacted]'],
    [
      '/put?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIA%2F2026&X-Amz-Signature=f00d&X-Amz-Security-Token=tok',
      '/put?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=[redacted]&X-Amz-Signature=[redacted]&X-Amz-Security-Token=[redacted]',
    ],
    [
      '/cb?code=abc&state=x&access_token=t&api_key=k&sig=s',
      '/cb?code=[redacted]&state=x&access_token=[redacted]&api_key=[redacted]&sig=[redacted]',
    ],
    ['/api/v1/marketplace/jobs?limit=10&offset=0', '/api/v1/marketplace/jobs?limit=10&offset=0'],
    ['/no-query', '/no-query'],
    ['/odd?%zz=1&sig%6eature=x', '/odd?%zz=1&sig%6eature=[redacted]'],
  ])('%s', (url, expected) => {
    expect(redactQuery(url)).toBe(expected);
  });
});

describe('logs and caching of secrets', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

  it('a presigned file URL is logged with its signature redacted', async () => {
    const url = new URL(presignFileUrl(t.ctx, 'img-test-0.png'));
    const signature = url.searchParams.get('signature') ?? '';
    expect(signature).toMatch(/^[0-9a-f]{32,}$/);
    await t.app.inject({ method: 'GET', url: `${url.pathname}${url.search}` });
    await t.app.inject({ method: 'GET', url: '/api/v1/health?token=tok_secret_value&X-Amz-Signature=deadbeefcafe' });
    const text = t.logs.text();
    expect(text).toContain(`${url.pathname}?expires=${url.searchParams.get('expires') ?? ''}&signature=[redacted]`);
    expect(text).toContain('/api/v1/health?token=[redacted]&X-Amz-Signature=[redacted]');
    expect(text).not.toContain(signature);
    expect(text).not.toContain('tok_secret_value');
    expect(text).not.toContain('deadbeefcafe');
  });

  it('signup, login, key creation, invites and invite acceptance answer Cache-Control: no-store', async () => {
    const email = `nostore-${Date.now()}@example.test`;
    const password = 'correct horse battery staple';
    const signup = await t.app.inject({
      method: 'POST',
      url: '/api/v1/auth/signup',
      payload: { email, password, name: 'No Store' },
    });
    expect([signup.statusCode, signup.headers['cache-control']]).toEqual([201, 'no-store']);
    const login = await t.app.inject({ method: 'POST', url: '/api/v1/auth/login', payload: { email, password } });
    expect([login.statusCode, login.headers['cache-control']]).toEqual([200, 'no-store']);
    const token = login.json().token as string;
    const key = await t.app.inject({
      method: 'POST',
      url: '/api/v1/auth/api-keys',
      headers: bearer(token),
      payload: { label: 'k', scopes: ['buyer'] },
    });
    expect([key.statusCode, key.headers['cache-control']]).toEqual([201, 'no-store']);
    const invite = await t.app.inject({
      method: 'POST',
      url: '/api/v1/organizations/current/invites',
      headers: bearer(token),
      payload: { email: `invitee-${Date.now()}@example.test`, role: 'member' },
    });
    expect([invite.statusCode, invite.headers['cache-control']]).toEqual([201, 'no-store']);
    const accept = await t.app.inject({
      method: 'POST',
      url: '/api/v1/organizations/invites/accept',
      payload: { token: invite.json().invite_token, password, name: 'Invitee' },
    });
    expect([accept.statusCode, accept.headers['cache-control']]).toEqual([200, 'no-store']);
    // A failed login says no-store too (the flag is per route, not per outcome).
    const bad = await t.app.inject({
      method: 'POST',
      url: '/api/v1/auth/login',
      payload: { email, password: 'wrong password entirely' },
    });
    expect([bad.statusCode, bad.headers['cache-control']]).toEqual([401, 'no-store']);
    // Responses without secrets are left to the default.
    const buyer = await signUp(t.app);
    const me = await t.app.inject({ method: 'GET', url: '/api/v1/auth/me', headers: bearer(buyer.token) });
    expect([me.statusCode, me.headers['cache-control']]).toEqual([200, undefined]);
  });

  it('responses carrying capability URLs answer Cache-Control: no-store (issue 40, point 8)', async () => {
    const buyer = await signUp(t.app);
    const as = (credential: string) => ({ ...bearer(credential), 'content-type': 'application/json' });
    const cacheOf = async (method: 'GET' | 'POST', url: string, credential: string, payload?: object) => {
      const res = await t.app.inject({ method, url, headers: as(credential), payload });
      return [`${method} ${url.replace(/\/(topup|gw|wrk)_\w+/, '/:id')}`, res.statusCode, res.headers['cache-control']];
    };
    // A top-up's checkout page, where it starts and wherever it is read again.
    const topup = await t.app.inject({
      method: 'POST',
      url: '/api/v1/billing/topups',
      headers: as(buyer.token),
      payload: { amount_cents: 1000 },
    });
    expect([topup.statusCode, topup.headers['cache-control']]).toEqual([201, 'no-store']);
    const topupId = String(topup.json().topup_id);
    // The payout account's onboarding link.
    const operator = await createKey(t.app, buyer, ['operator']);
    const account = await t.app.inject({
      method: 'POST',
      url: '/api/v1/node/connect',
      headers: as(operator),
      payload: { email: buyer.email, country: 'CA' },
    });
    // Presigned object URLs: a node's work (its inputs) and its outputs' upload URLs.
    const node = await createTestNode(t.app, operator);
    const poll = await node.call('GET', '/api/v1/node/work?wait_ms=0');
    const outputs = await node.call('POST', '/api/v1/node/work/wrk_00000000000000000000000000/outputs', { files: [] });
    expect([
      await cacheOf('GET', '/api/v1/billing/topups', buyer.token),
      await cacheOf('GET', `/api/v1/billing/topups/${topupId}`, buyer.token),
      await cacheOf('POST', '/api/v1/node/connect/onboarding', operator, { account_id: account.json().account_id }),
      // Presigned image URLs: generated, and presigned afresh when a request is read again (the flag is per route).
      await cacheOf('POST', '/v1/images/generations', buyer.apiKey, { model: 'no-such-model', prompt: 'a cat' }),
      await cacheOf('GET', '/api/v1/gateway/requests/gw_00000000000000000000000000', buyer.apiKey),
      ['GET /api/v1/node/work', poll.statusCode, poll.headers['cache-control']],
      ['POST /api/v1/node/work/:id/outputs', outputs.statusCode, outputs.headers['cache-control']],
    ]).toEqual([
      ['GET /api/v1/billing/topups', 200, 'no-store'],
      ['GET /api/v1/billing/topups/:id', 200, 'no-store'],
      ['POST /api/v1/node/connect/onboarding', 200, 'no-store'],
      ['POST /v1/images/generations', expect.any(Number), 'no-store'],
      ['GET /api/v1/gateway/requests/:id', 404, 'no-store'],
      ['GET /api/v1/node/work', 200, 'no-store'],
      ['POST /api/v1/node/work/:id/outputs', 404, 'no-store'],
    ]);
  });
});

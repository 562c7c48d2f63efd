import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createTestApp, signUp, type TestApp } from '../../test/harness.js';
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
});

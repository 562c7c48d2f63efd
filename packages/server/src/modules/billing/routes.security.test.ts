import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createKey, createTestApp, signUp, type TestApp, type TestBuyer } from '../../../test/harness.js';
import { createLedger } from './service.js';

const ROUTES = ['/api/v1/billing/balance', '/api/v1/billing/transactions', '/api/v1/billing/transactions?format=csv'];

describe('billing routes: who may read which ledger', () => {
  let t: TestApp;
  let alice: TestBuyer;
  let bob: TestBuyer;
  beforeAll(async () => {
    t = await createTestApp();
    alice = await signUp(t.app);
    bob = await signUp(t.app);
    const ledger = createLedger(t.ctx.db);
    await ledger.credit(alice.orgId, 10_000, { txType: 'topup', description: 'alice top-up' });
    await ledger.charge(alice.orgId, 1_230_000, { description: 'alice job' });
  });
  afterAll(() => t.close());

  const get = (url: string, headers: Record<string, string>) => t.app.inject({ method: 'GET', url, headers });

  it('each organization sees only its own ledger: a second buyer sees only their free tier row', async () => {
    const bobs = (await get('/api/v1/billing/transactions', bearer(bob.apiKey))).json();
    expect(bobs.total).toBe(1);
    expect(
      bobs.transactions.map((x: { tx_type: string; amount_cents: number }) => [x.tx_type, x.amount_cents]),
    ).toEqual([['free_tier', 500]]);
    expect((await get('/api/v1/billing/balance', bearer(bob.apiKey))).json()).toMatchObject({
      balance_cents: 500,
      available_cents: 500,
    });
    const alices = (await get('/api/v1/billing/transactions', bearer(alice.apiKey))).json();
    expect(alices.transactions.map((x: { amount_cents: number }) => x.amount_cents)).toEqual([-123, 10_000, 500]);
    expect((await get('/api/v1/billing/balance', bearer(alice.apiKey))).json()).toMatchObject({
      balance_cents: 10_377,
    });
    const bobCsv = (await get('/api/v1/billing/transactions?format=csv', bearer(bob.apiKey))).body;
    expect(bobCsv).not.toContain('alice');
  });

  it('the org cannot be chosen by the caller: an org parameter is refused, not obeyed', async () => {
    const res = await get(`/api/v1/billing/transactions?org_id=${alice.orgId}`, bearer(bob.apiKey));
    expect(res.statusCode).toBe(400);
  });

  it('a session token reads the same ledger as the key', async () => {
    const res = await get('/api/v1/billing/balance', bearer(alice.token));
    expect(res.json()).toMatchObject({ balance_cents: 10_377 });
  });

  it('a write-only key gets 403 insufficient_scope; a read-only key may read', async () => {
    const writeOnly = await createKey(t.app, alice, ['write-only']);
    const readOnly = await createKey(t.app, alice, ['read-only']);
    for (const url of ROUTES) {
      const denied = await get(url, bearer(writeOnly));
      expect(denied.statusCode, url).toBe(403);
      expect(denied.json().error).toBe('insufficient_scope');
      expect(denied.json().message).toContain('billing:read');
      expect((await get(url, bearer(readOnly))).statusCode, url).toBe(200);
    }
    expect((await get('/api/v1/billing/balance', { 'x-api-key': readOnly })).json()).toMatchObject({
      balance_cents: 10_377,
    });
  });

  it('no credential is 401', async () => {
    for (const url of ROUTES) expect((await get(url, {})).statusCode).toBe(401);
  });
});

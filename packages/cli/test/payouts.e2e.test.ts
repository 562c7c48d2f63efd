import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  FAKE_STRIPE_WEBHOOK_SECRET,
  bearer,
  createTestApp,
  createTestStore,
  signStripeEvent,
  signUp,
  startFakeStripe,
  type FakeStripe,
  type TestStore,
} from '@svc/server/testing';
import { spawnSvc, until, waitForUrl, type SpawnedSvc } from './spawn.js';

/**
 * A payout run interrupted by `kill -9` of `svc serve` while Stripe has the transfer request but
 * has not answered: after the restart the payout is sent again with the same idempotency key,
 * and Stripe (the suite's fake, which honours idempotency keys as Stripe does) creates one transfer.
 */
describe('payouts survive kill -9 in the middle of a run (real svc serve processes)', () => {
  let store: TestStore;
  let stripe: FakeStripe;
  let server: SpawnedSvc | undefined;
  let operatorKey = '';
  let ownerKey = '';
  let orgId = '';

  const stripeEnv = { SVC_STRIPE_SECRET_KEY: 'sk_test_fake', SVC_STRIPE_WEBHOOK_SECRET: FAKE_STRIPE_WEBHOOK_SECRET };
  const serverEnv = () => ({
    ...stripeEnv,
    SVC_STRIPE_API_BASE: stripe.url,
    SVC_PAYOUT_INTERVAL: '2s',
    SVC_DATA_DIR: store.dataDir,
    SVC_PORT: '0',
    SVC_LOG_LEVEL: 'warn',
    // The fake Stripe listens on loopback: the SDK's requests go through the egress guard.
    SVC_ALLOW_PRIVATE_EGRESS: '1',
    ...(store.databaseUrl ? { DATABASE_URL: store.databaseUrl } : {}),
  });

  beforeAll(async () => {
    stripe = await startFakeStripe();
    store = await createTestStore();
    // Seed the store: an onboarded operator organization with 25.00 CAD of earnings.
    const t = await createTestApp({
      store,
      env: { ...stripeEnv, SVC_STRIPE_API_BASE: stripe.url, SVC_PAYOUT_INTERVAL: 'off' },
    });
    try {
      const owner = await signUp(t.app);
      orgId = owner.orgId;
      ownerKey = owner.apiKey;
      operatorKey = (
        await t.app.inject({
          method: 'POST',
          url: '/api/v1/auth/api-keys',
          headers: bearer(owner.token),
          payload: { label: 'node', scopes: ['operator'] },
        })
      ).json().api_key;
      const accountId = (
        await t.app.inject({
          method: 'POST',
          url: '/api/v1/node/connect',
          headers: bearer(operatorKey),
          payload: { email: owner.email, country: 'CA' },
        })
      ).json().account_id;
      const signed = signStripeEvent({
        id: 'evt_onboarded',
        type: 'account.updated',
        data: { object: { id: accountId, details_submitted: true, payouts_enabled: true } },
      });
      const hook = await t.app.inject({
        method: 'POST',
        url: '/api/v1/webhooks/payments/stripe',
        headers: { 'content-type': 'application/json', 'stripe-signature': signed.signature },
        payload: signed.body,
      });
      expect(hook.json().outcome).toBe('applied');
      await t.ctx.ledger.credit(orgId, 2_500, { txType: 'earning', description: 'earnings', ref: 'job_seed' });
    } finally {
      await t.close();
    }
  }, 60_000);

  afterAll(async () => {
    server?.child.kill('SIGKILL');
    await stripe?.close();
    await store?.drop();
  });

  it('pays once: one transfer at Stripe, one paid payout, one payout row on the ledger', async () => {
    const held = stripe.holdNext('/v1/transfers');
    server = spawnSvc(['serve'], serverEnv());
    await waitForUrl(server);
    await held.arrived;
    server.child.kill('SIGKILL');
    await server.exited;

    server = spawnSvc(['serve'], serverEnv());
    const base = await waitForUrl(server);
    const api = async (path: string, key = operatorKey) =>
      (await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${key}` } })).json();
    const payouts = await until('the payout paid after the restart', async () => {
      const list = (await api('/api/v1/payouts')) as {
        payouts: { id: string; status: string; amount_cents: number; provider_ref: string | null }[];
      };
      return list.payouts[0]?.status === 'paid' ? list.payouts : undefined;
    });
    held.release();

    expect(payouts).toHaveLength(1);
    const payout = payouts[0];
    expect(payout).toMatchObject({ status: 'paid', amount_cents: 2_500 });
    const transfers = stripe.requests.filter((r) => r.path === '/v1/transfers');
    expect(transfers.length).toBeGreaterThanOrEqual(2);
    expect(new Set(transfers.map((r) => r.idempotencyKey))).toEqual(new Set([`svc-payout-${payout?.id}`]));
    expect(stripe.created['/v1/transfers']).toHaveLength(1);
    expect(payout?.provider_ref).toBe(stripe.created['/v1/transfers']?.[0]?.id);

    const ledger = (await api('/api/v1/billing/transactions', ownerKey)) as {
      transactions: { tx_type: string; amount_cents: number }[];
    };
    expect(ledger.transactions.filter((r) => r.tx_type === 'payout')).toEqual([
      expect.objectContaining({ amount_cents: -2_500 }),
    ]);
    expect(((await api('/api/v1/payouts')) as { payable_cents: number }).payable_cents).toBe(0);
  }, 120_000);
});

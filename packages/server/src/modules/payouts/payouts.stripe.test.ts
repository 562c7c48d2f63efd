import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createKey, createTestApp, signUp, type TestApp, type TestBuyer } from '../../../test/harness.js';
import {
  FAKE_STRIPE_WEBHOOK_SECRET,
  signStripeEvent,
  startFakeStripe,
  type FakeStripe,
} from '../../../test/fake-stripe.js';
import { createEgress } from '../../platform/egress.js';
import { createPaymentProvider } from '../../platform/payments/index.js';
import { runPayouts, type PaymentDeps } from './service.js';

let t: TestApp;
let stripe: FakeStripe;
let deps: PaymentDeps;

async function webhook(
  event: Record<string, unknown>,
  options: { secret?: string; timestamp?: number; signature?: string | null } = {},
) {
  const signed = signStripeEvent(event, options);
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (options.signature !== null) headers['stripe-signature'] = options.signature ?? signed.signature;
  return t.app.inject({ method: 'POST', url: '/api/v1/webhooks/payments/stripe', headers, payload: signed.body });
}

async function balance(buyer: TestBuyer): Promise<number> {
  return (await t.app.inject({ method: 'GET', url: '/api/v1/billing/balance', headers: bearer(buyer.apiKey) })).json()
    .balance_cents as number;
}

/** An operator organization with a Stripe account onboarded through a signed `account.updated`. */
async function onboardedOperator(): Promise<{ buyer: TestBuyer; key: string; accountId: string }> {
  const buyer = await signUp(t.app);
  const key = await createKey(t.app, buyer, ['operator'], 'node');
  const res = await t.app.inject({
    method: 'POST',
    url: '/api/v1/node/connect',
    headers: bearer(key),
    payload: { email: buyer.email, country: 'CA' },
  });
  const accountId = res.json().account_id as string;
  const hook = await webhook({
    id: `evt_onb_${accountId}`,
    type: 'account.updated',
    data: { object: { id: accountId, object: 'account', details_submitted: true, payouts_enabled: true } },
  });
  expect(hook.statusCode).toBe(200);
  return { buyer, key, accountId };
}

beforeAll(async () => {
  stripe = await startFakeStripe();
  t = await createTestApp({
    env: {
      SVC_STRIPE_SECRET_KEY: 'sk_test_fake',
      SVC_STRIPE_WEBHOOK_SECRET: FAKE_STRIPE_WEBHOOK_SECRET,
      SVC_STRIPE_API_BASE: stripe.url,
      SVC_PAYOUT_INTERVAL: 'off',
    },
  });
  deps = { db: t.ctx.db, ledger: t.ctx.ledger, payments: t.ctx.payments, config: t.ctx.config };
});

afterAll(async () => {
  await t?.close();
  await stripe?.close();
});

describe('Stripe Connect onboarding', () => {
  it('creates one Express account per organization with an idempotency key, and a fresh onboarding link', async () => {
    const buyer = await signUp(t.app);
    const key = await createKey(t.app, buyer, ['operator'], 'node');
    const first = await t.app.inject({
      method: 'POST',
      url: '/api/v1/node/connect',
      headers: bearer(key),
      payload: { email: 'ops@example.test', country: 'CA' },
    });
    expect(first.statusCode).toBe(201);
    const accountId = first.json().account_id as string;
    expect(accountId).toMatch(/^acct_fake\d+$/);
    const again = await t.app.inject({
      method: 'POST',
      url: '/api/v1/node/connect',
      headers: bearer(key),
      payload: { email: 'ops@example.test', country: 'CA' },
    });
    expect(again.statusCode).toBe(200);
    expect(again.json().account_id).toBe(accountId);

    const calls = stripe.requests.filter(
      (r) => r.path === '/v1/accounts' && r.form['metadata[org_id]'] === buyer.orgId,
    );
    expect(calls).toHaveLength(1);
    expect(calls[0]).toMatchObject({
      idempotencyKey: `svc-account-${buyer.orgId}`,
      authorization: 'Bearer sk_test_fake',
      form: { type: 'express', email: 'ops@example.test', country: 'CA', 'capabilities[transfers][requested]': 'true' },
    });

    const link = await t.app.inject({
      method: 'POST',
      url: '/api/v1/node/connect/onboarding',
      headers: bearer(key),
      payload: { account_id: accountId },
    });
    expect(link.statusCode).toBe(200);
    expect(link.json().url).toMatch(/^https:\/\/connect\.stripe\.test\/setup\/e\/acct_fake/);
    const linkCall = stripe.requests.filter((r) => r.path === '/v1/account_links').at(-1);
    expect(linkCall?.form).toMatchObject({
      account: accountId,
      type: 'account_onboarding',
      return_url: `${t.ctx.config.publicUrl}/payouts`,
    });

    const status = await t.app.inject({ method: 'GET', url: '/api/v1/node/connect/status', headers: bearer(key) });
    expect(status.json()).toEqual({
      account_id: accountId,
      onboarded: false,
      provider: 'stripe',
      moves_real_money: true,
    });
    const hook = await webhook({
      id: 'evt_acct_1',
      type: 'account.updated',
      data: { object: { id: accountId, object: 'account', details_submitted: true, payouts_enabled: true } },
    });
    expect(hook.json()).toEqual({ received: true, outcome: 'applied' });
    expect(
      (await t.app.inject({ method: 'GET', url: '/api/v1/node/connect/status', headers: bearer(key) })).json()
        .onboarded,
    ).toBe(true);
  });

  it("refuses a buyer key (scope), a member session (role), another organization's account (404) and bad input (400)", async () => {
    const owner = await signUp(t.app);
    const buyerKey = await t.app.inject({
      method: 'POST',
      url: '/api/v1/node/connect',
      headers: bearer(owner.apiKey),
      payload: { email: owner.email, country: 'CA' },
    });
    expect(buyerKey.statusCode).toBe(403);
    expect(buyerKey.json().error).toBe('insufficient_scope');
    const bad = await t.app.inject({
      method: 'POST',
      url: '/api/v1/node/connect',
      headers: bearer(owner.token),
      payload: { email: 'not-an-email', country: 'ca' },
    });
    expect(bad.statusCode).toBe(400);

    const other = await onboardedOperator();
    const foreign = await t.app.inject({
      method: 'POST',
      url: '/api/v1/node/connect/onboarding',
      headers: bearer(owner.token),
      payload: { account_id: other.accountId },
    });
    expect(foreign.statusCode).toBe(404);

    const invite = await t.app.inject({
      method: 'POST',
      url: '/api/v1/organizations/current/invites',
      headers: bearer(owner.token),
      payload: { email: `member-${Date.now()}@example.test`, role: 'member' },
    });
    expect(invite.statusCode).toBe(201);
    const accepted = await t.app.inject({
      method: 'POST',
      url: '/api/v1/organizations/invites/accept',
      payload: { token: invite.json().invite_token, password: 'correct horse battery staple' },
    });
    expect(accepted.statusCode).toBeLessThan(300);
    const member = await t.app.inject({
      method: 'GET',
      url: '/api/v1/node/connect/status',
      headers: bearer(accepted.json().token as string),
    });
    expect(member.statusCode).toBe(403);
    expect(member.json().error).toBe('forbidden');
  });
});

describe('webhooks', () => {
  it('refuse unsigned, badly signed, stale and other-secret events, and change nothing', async () => {
    const { key, accountId } = await (async () => {
      const buyer = await signUp(t.app);
      const k = await createKey(t.app, buyer, ['operator'], 'node');
      const r = await t.app.inject({
        method: 'POST',
        url: '/api/v1/node/connect',
        headers: bearer(k),
        payload: { email: buyer.email, country: 'CA' },
      });
      return { key: k, accountId: r.json().account_id as string };
    })();
    const event = {
      id: 'evt_forged',
      type: 'account.updated',
      data: { object: { id: accountId, object: 'account', details_submitted: true, payouts_enabled: true } },
    };
    const attempts = [
      await webhook(event, { signature: null }),
      await webhook(event, { secret: 'whsec_someone_else' }),
      await webhook(event, { timestamp: Math.floor(Date.now() / 1000) - 3600 }),
      await webhook(event, { signature: 't=1,v1=00' }),
    ];
    for (const [i, res] of attempts.entries()) {
      expect([i, res.statusCode, res.body]).toEqual([i, 400, expect.any(String)]);
      expect(res.json()).toMatchObject({ code: 400, error: 'invalid_request' });
    }
    expect(
      (await t.app.inject({ method: 'GET', url: '/api/v1/node/connect/status', headers: bearer(key) })).json()
        .onboarded,
    ).toBe(false);
    expect(
      (
        await t.app.inject({
          method: 'POST',
          url: '/api/v1/webhooks/payments/paypal',
          headers: { 'content-type': 'application/json' },
          payload: '{}',
        })
      ).statusCode,
    ).toBe(404);
  });
});

describe('top-ups through Stripe Checkout', () => {
  it('adds the credit exactly once, when the signed confirmation arrives; a replay changes nothing', async () => {
    const buyer = await signUp(t.app);
    const before = await balance(buyer);
    const res = await t.app.inject({
      method: 'POST',
      url: '/api/v1/billing/topups',
      headers: bearer(buyer.apiKey),
      payload: { amount_cents: 2500 },
    });
    expect(res.statusCode).toBe(201);
    const topup = res.json();
    expect(topup).toMatchObject({ amount_cents: 2500, currency: 'CAD', status: 'pending', provider: 'stripe' });
    expect(topup.checkout_url).toMatch(/^https:\/\/checkout\.stripe\.test\/c\/pay\/cs_test_fake\d+$/);
    const call = stripe.requests.filter((r) => r.path === '/v1/checkout/sessions').at(-1);
    expect(call).toMatchObject({
      idempotencyKey: `svc-topup-${topup.topup_id}`,
      form: {
        mode: 'payment',
        client_reference_id: topup.topup_id,
        'metadata[topup_id]': topup.topup_id,
        'metadata[org_id]': buyer.orgId,
        'line_items[0][price_data][currency]': 'cad',
        'line_items[0][price_data][unit_amount]': '2500',
        'line_items[0][quantity]': '1',
      },
    });
    expect(await balance(buyer)).toBe(before);

    const sessionId = topup.checkout_url.split('/').at(-1) as string;
    const completed = {
      id: 'evt_paid_1',
      type: 'checkout.session.completed',
      data: {
        object: {
          id: sessionId,
          object: 'checkout.session',
          client_reference_id: topup.topup_id,
          amount_total: 2500,
          currency: 'cad',
          payment_status: 'paid',
          metadata: { topup_id: topup.topup_id },
        },
      },
    };
    expect((await webhook(completed)).json()).toEqual({ received: true, outcome: 'applied' });
    expect(await balance(buyer)).toBe(before + 2500);
    expect((await webhook(completed)).json()).toEqual({ received: true, outcome: 'duplicate' });
    // Stripe may also send async_payment_succeeded for the same session: still one credit.
    expect(
      (await webhook({ ...completed, id: 'evt_paid_2', type: 'checkout.session.async_payment_succeeded' })).json()
        .outcome,
    ).toBe('ignored');
    expect(await balance(buyer)).toBe(before + 2500);

    const view = await t.app.inject({
      method: 'GET',
      url: `/api/v1/billing/topups/${topup.topup_id}`,
      headers: bearer(buyer.apiKey),
    });
    // Stripe vouches for the payment: paid credit at once, never promotional.
    expect(view.json()).toMatchObject({ status: 'paid', amount_cents: 2500, confirmed_at: expect.any(String) });
    const ledger = (
      await t.app.inject({ method: 'GET', url: '/api/v1/billing/transactions', headers: bearer(buyer.apiKey) })
    ).json().transactions as { tx_type: string; ref: string; amount_cents: number; free_micro: number }[];
    expect(ledger.filter((row) => row.tx_type === 'topup')).toEqual([
      expect.objectContaining({ ref: topup.topup_id, amount_cents: 2500, free_micro: 0 }),
    ]);

    const stranger = await signUp(t.app);
    expect(
      (
        await t.app.inject({
          method: 'GET',
          url: `/api/v1/billing/topups/${topup.topup_id}`,
          headers: bearer(stranger.apiKey),
        })
      ).statusCode,
    ).toBe(404);
  });

  it('credits nothing when the confirmed amount differs, and refuses amounts out of bounds', async () => {
    const buyer = await signUp(t.app);
    const before = await balance(buyer);
    const topup = (
      await t.app.inject({
        method: 'POST',
        url: '/api/v1/billing/topups',
        headers: bearer(buyer.apiKey),
        payload: { amount_cents: 1000 },
      })
    ).json();
    const sessionId = topup.checkout_url.split('/').at(-1) as string;
    await webhook({
      id: 'evt_short',
      type: 'checkout.session.completed',
      data: {
        object: {
          id: sessionId,
          client_reference_id: topup.topup_id,
          amount_total: 1,
          currency: 'cad',
          payment_status: 'paid',
        },
      },
    });
    expect(await balance(buyer)).toBe(before);
    const view = (
      await t.app.inject({
        method: 'GET',
        url: `/api/v1/billing/topups/${topup.topup_id}`,
        headers: bearer(buyer.apiKey),
      })
    ).json();
    expect(view.status).toBe('failed');
    expect(view.failure_reason).toMatch(/confirmed 1 CAD, not 1000 CAD/);
    for (const amount_cents of [0, 499, 100_000_001, 12.5]) {
      const res = await t.app.inject({
        method: 'POST',
        url: '/api/v1/billing/topups',
        headers: bearer(buyer.apiKey),
        payload: { amount_cents },
      });
      expect(res.statusCode).toBe(400);
    }
  });
});

describe('payout runs through Stripe transfers', () => {
  it('pays payable earnings once, with an idempotency key from the payout id, and records a payout row on the ledger', async () => {
    const op = await onboardedOperator();
    await t.ctx.ledger.credit(op.buyer.orgId, 1_700, {
      txType: 'earning',
      description: 'test earnings',
      ref: 'job_test',
    });
    const report = await runPayouts(deps);
    const mine = report.created.filter((p) => p.org_id === op.buyer.orgId);
    expect(mine).toHaveLength(1);
    const payout = mine[0];
    expect(payout).toMatchObject({ amount_cents: 1_700, status: 'paid', currency: 'CAD' });
    const transfer = stripe.requests.filter(
      (r) => r.path === '/v1/transfers' && r.form['metadata[payout_id]'] === payout?.id,
    );
    expect(transfer).toHaveLength(1);
    expect(transfer[0]).toMatchObject({
      idempotencyKey: `svc-payout-${payout?.id}`,
      form: { amount: '1700', currency: 'cad', destination: op.accountId },
    });
    expect(payout?.provider_ref).toMatch(/^tr_fake\d+$/);

    const list = (await t.app.inject({ method: 'GET', url: '/api/v1/payouts', headers: bearer(op.key) })).json();
    expect(list).toMatchObject({ total: 1, payable_cents: 0, minimum_cents: 1_000, provider: 'stripe' });
    expect(list.payouts[0]).toMatchObject({
      id: payout?.id,
      status: 'paid',
      amount_cents: 1_700,
      provider_ref: payout?.provider_ref,
      failure_reason: null,
    });
    const ledger = (
      await t.app.inject({ method: 'GET', url: '/api/v1/billing/transactions', headers: bearer(op.buyer.token) })
    ).json().transactions as { tx_type: string; ref: string; amount_cents: number }[];
    expect(ledger.filter((r) => r.tx_type === 'payout')).toEqual([
      expect.objectContaining({ ref: payout?.id, amount_cents: -1_700 }),
    ]);

    const again = await runPayouts(deps);
    expect(again.created.filter((p) => p.org_id === op.buyer.orgId)).toHaveLength(0);
  });

  it('waits below the minimum, never pays what was spent, and keeps a refused transfer payable with its reason', async () => {
    const small = await onboardedOperator();
    await t.ctx.ledger.credit(small.buyer.orgId, 900, { txType: 'earning', description: 'small', ref: 'job_small' });
    const spent = await onboardedOperator();
    await t.ctx.ledger.credit(spent.buyer.orgId, 1_500, { txType: 'earning', description: 'earned', ref: 'job_spent' });
    const available = (await t.ctx.ledger.balance(spent.buyer.orgId)).available_cents;
    await t.ctx.ledger.charge(spent.buyer.orgId, (available - 600) * 10_000, { description: 'spent on jobs' });
    const report = await runPayouts(deps);
    expect(report.created.filter((p) => p.org_id === small.buyer.orgId || p.org_id === spent.buyer.orgId)).toHaveLength(
      0,
    );
    expect(
      (await t.app.inject({ method: 'GET', url: '/api/v1/payouts', headers: bearer(spent.key) })).json().payable_cents,
    ).toBe(600);

    const refused = await onboardedOperator();
    await t.ctx.ledger.credit(refused.buyer.orgId, 2_000, {
      txType: 'earning',
      description: 'earned',
      ref: 'job_refused',
    });
    stripe.failNext('/v1/transfers', 400, 'Insufficient funds in your Stripe account');
    const failed = (await runPayouts(deps)).created.find((p) => p.org_id === refused.buyer.orgId);
    expect(failed).toMatchObject({ status: 'failed', amount_cents: 2_000 });
    expect(failed?.failure_reason).toMatch(/Insufficient funds/);
    const view = (await t.app.inject({ method: 'GET', url: '/api/v1/payouts', headers: bearer(refused.key) })).json();
    expect(view.payable_cents).toBe(2_000);
    expect(view.payouts[0]).toMatchObject({
      status: 'failed',
      failure_reason: expect.stringMatching(/Insufficient funds/),
    });
    const paid = (await runPayouts(deps)).created.find((p) => p.org_id === refused.buyer.orgId);
    expect(paid).toMatchObject({ status: 'paid', amount_cents: 2_000 });
  });
});

describe('the Stripe SDK goes through the egress guard', () => {
  it('with private egress refused, a call to a Stripe API on loopback is refused before it connects', async () => {
    const egress = createEgress({ allowPrivate: false });
    try {
      const provider = createPaymentProvider(t.ctx.config, t.ctx.secrets, egress);
      const before = stripe.requests.length;
      const attempt = provider.createAccount({ orgId: 'org_egress', email: 'ops@example.test', country: 'CA' });
      // The SDK reports it as a connection error (after its own retries); nothing reached the API.
      await expect(attempt).rejects.toMatchObject({ type: 'StripeConnectionError' });
      expect(stripe.requests.length).toBe(before);
    } finally {
      await egress.close();
    }
  });
});

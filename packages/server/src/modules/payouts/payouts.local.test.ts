import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createKey, createTestApp, signUp, type TestApp } from '../../../test/harness.js';
import { markPayoutPaid, runPayouts } from './service.js';

let t: TestApp;

/** The path and query of a local page URL, for app.inject. */
function local(url: string): string {
  const u = new URL(url);
  expect(u.origin).toBe(t.ctx.config.publicUrl);
  return `${u.pathname}${u.search}`;
}

const FORM = { 'content-type': 'application/x-www-form-urlencoded' };

beforeAll(async () => {
  t = await createTestApp({ env: { SVC_PAYOUT_INTERVAL: 'off' } });
});

afterAll(async () => {
  await t?.close();
});

describe('the local payment provider (the offline default)', () => {
  it('onboards through its own page, which says no real money moves', async () => {
    const buyer = await signUp(t.app);
    const key = await createKey(t.app, buyer, ['operator'], 'node');
    const created = await t.app.inject({
      method: 'POST',
      url: '/api/v1/node/connect',
      headers: bearer(key),
      payload: { email: buyer.email, country: 'FR' },
    });
    expect(created.statusCode).toBe(201);
    const accountId = created.json().account_id as string;
    expect(accountId).toMatch(/^acct_local_[0-9a-f]{18}$/);
    const { url } = (
      await t.app.inject({
        method: 'POST',
        url: '/api/v1/node/connect/onboarding',
        headers: bearer(key),
        payload: { account_id: accountId },
      })
    ).json();

    const page = await t.app.inject({ method: 'GET', url: local(url) });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.body).toContain('no real money moves');
    expect(page.body).toContain(accountId);

    const tampered = local(url).replace(/signature=[0-9a-f]/, (m) =>
      m.endsWith('0') ? m.slice(0, -1) + '1' : m.slice(0, -1) + '0',
    );
    expect(
      (await t.app.inject({ method: 'POST', url: tampered, headers: FORM, payload: 'action=complete' })).statusCode,
    ).toBe(404);
    expect(
      (await t.app.inject({ method: 'GET', url: '/api/v1/node/connect/status', headers: bearer(key) })).json()
        .onboarded,
    ).toBe(false);

    const submitted = await t.app.inject({
      method: 'POST',
      url: local(url),
      headers: FORM,
      payload: 'action=complete',
    });
    expect(submitted.statusCode).toBe(303);
    expect(submitted.headers.location).toBe(`${t.ctx.config.publicUrl}/payouts`);
    expect(
      (await t.app.inject({ method: 'GET', url: '/api/v1/node/connect/status', headers: bearer(key) })).json(),
    ).toEqual({
      account_id: accountId,
      onboarded: true,
      provider: 'local',
      moves_real_money: false,
    });
  });

  it('tops up through its checkout page: the credit lands once, a second submit adds nothing', async () => {
    const buyer = await signUp(t.app);
    const before = (
      await t.app.inject({ method: 'GET', url: '/api/v1/billing/balance', headers: bearer(buyer.apiKey) })
    ).json().balance_cents as number;
    const topup = (
      await t.app.inject({
        method: 'POST',
        url: '/api/v1/billing/topups',
        headers: bearer(buyer.apiKey),
        payload: { amount_cents: 1_000 },
      })
    ).json();
    expect(topup).toMatchObject({ provider: 'local', status: 'pending' });
    const page = await t.app.inject({ method: 'GET', url: local(topup.checkout_url) });
    expect(page.body).toContain('10.00 CAD');
    for (let i = 0; i < 2; i++) {
      const paid = await t.app.inject({
        method: 'POST',
        url: local(topup.checkout_url),
        headers: FORM,
        payload: 'action=pay',
      });
      expect(paid.statusCode).toBe(303);
      expect(paid.headers.location).toBe(`${t.ctx.config.publicUrl}/billing?topup=${topup.topup_id}`);
    }
    const after = (
      await t.app.inject({ method: 'GET', url: '/api/v1/billing/balance', headers: bearer(buyer.apiKey) })
    ).json().balance_cents as number;
    expect(after).toBe(before + 1_000);
    expect(
      (
        await t.app.inject({
          method: 'GET',
          url: `/api/v1/billing/topups/${topup.topup_id}`,
          headers: bearer(buyer.apiKey),
        })
      ).json().status,
    ).toBe('paid');
    const list = (
      await t.app.inject({ method: 'GET', url: '/api/v1/billing/topups', headers: bearer(buyer.apiKey) })
    ).json();
    expect(list).toMatchObject({
      total: 1,
      topups: [expect.objectContaining({ topup_id: topup.topup_id, status: 'paid' })],
    });
  });

  it('cancelling a checkout fails the top-up and credits nothing', async () => {
    const buyer = await signUp(t.app);
    const topup = (
      await t.app.inject({
        method: 'POST',
        url: '/api/v1/billing/topups',
        headers: bearer(buyer.apiKey),
        payload: { amount_cents: 700 },
      })
    ).json();
    await t.app.inject({ method: 'POST', url: local(topup.checkout_url), headers: FORM, payload: 'action=cancel' });
    const view = (
      await t.app.inject({
        method: 'GET',
        url: `/api/v1/billing/topups/${topup.topup_id}`,
        headers: bearer(buyer.apiKey),
      })
    ).json();
    expect(view).toMatchObject({ status: 'failed', failure_reason: 'the checkout expired or the payment failed' });
  });

  it('records payouts as pending until marked paid by hand', async () => {
    const buyer = await signUp(t.app);
    const key = await createKey(t.app, buyer, ['operator'], 'node');
    const accountId = (
      await t.app.inject({
        method: 'POST',
        url: '/api/v1/node/connect',
        headers: bearer(key),
        payload: { email: buyer.email, country: 'CA' },
      })
    ).json().account_id as string;
    const { url } = (
      await t.app.inject({
        method: 'POST',
        url: '/api/v1/node/connect/onboarding',
        headers: bearer(key),
        payload: { account_id: accountId },
      })
    ).json();
    await t.app.inject({ method: 'POST', url: local(url), headers: FORM, payload: 'action=complete' });
    await t.ctx.ledger.credit(buyer.orgId, 1_234, { txType: 'earning', description: 'earned', ref: 'job_local' });

    const deps = { db: t.ctx.db, ledger: t.ctx.ledger, payments: t.ctx.payments, config: t.ctx.config };
    const payout = (await runPayouts(deps)).created.find((p) => p.org_id === buyer.orgId);
    expect(payout).toMatchObject({
      status: 'pending',
      amount_cents: 1_234,
      provider: 'local',
      provider_ref: `tr_local_${payout?.id}`,
    });
    expect((await runPayouts(deps)).created.find((p) => p.org_id === buyer.orgId)).toBeUndefined();
    const paid = await markPayoutPaid(deps, payout?.id ?? '', 'bank-ref-42');
    expect(paid).toMatchObject({ status: 'paid', provider_ref: 'bank-ref-42' });
    await expect(markPayoutPaid(deps, payout?.id ?? '', 'again')).rejects.toMatchObject({ code: 'conflict' });
  });
});

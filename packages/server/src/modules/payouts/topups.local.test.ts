import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { meteringBound } from '@svc/protocol';
import { bearer, createTestNode, signUp, type TestApp, type TestBuyer } from '../../../test/harness.js';
import { createPayoutTestApp, localPage, onboardLocally, payLocalTopup } from '../../../test/payout-account.js';
import { payableEarnings, reconcileAccount } from '../billing/service.js';
import { confirmTopup, runPayouts, type PaymentDeps } from './service.js';

/**
 * Local top-ups are promotional until confirmed (issue 40, point 4). With the default `local`
 * provider any buyer can submit its own checkout page (`action=pay`): that credit buys compute,
 * but what it pays a node never becomes payable, until an administrator confirms the payment
 * (`svc topups confirm`, confirmTopup).
 */
describe('a top-up through the local provider', () => {
  let t: TestApp;
  let deps: PaymentDeps;
  beforeAll(async () => {
    ({ t, deps } = await createPayoutTestApp());
  });
  afterAll(() => t?.close());

  /** An onboarded organization with a node of its own, the only one in `country`, at the price ceiling. */
  async function selfDealer(country: string) {
    const buyer = await signUp(t.app);
    const { operatorKey } = await onboardLocally(t.app, buyer);
    const node = await createTestNode(t.app, operatorKey, {
      country,
      models: [MODEL],
      price_micro_per_unit: { '1': 12 },
    });
    return { buyer, node };
  }

  /**
   * A model with a large context and 38 prompts: the job's metering bound (docs/receipts.md) is
   * 38 x (10 + 16 + 32,768 + 256) = 1,255,900 tokens, so the receipt below is one the server accepts.
   */
  const MODEL = 'svc-llama-3.2-3b';
  const PROMPTS = Array.from({ length: 38 }, () => 'pay myself');
  const UNITS = 1_250_000;

  /** A job of `budget` CAD on the organization's own node, reported at 1,250,000 tokens (15 CAD at 12 µ). */
  async function spendOnOwnNode(
    { buyer, node }: { buyer: TestBuyer; node: Awaited<ReturnType<typeof createTestNode>> },
    country: string,
    budget: number,
  ) {
    const submit = await t.app.inject({
      method: 'POST',
      url: '/api/v1/marketplace/jobs',
      headers: bearer(buyer.apiKey),
      payload: {
        kind: 1,
        budget,
        max_price_per_unit: 0.000012,
        currency: 'CAD',
        model: MODEL,
        inline_text: PROMPTS.map((p) => `${p}\n`).join(''),
        strict_jurisdiction: country,
      },
    });
    expect(submit.statusCode, submit.body).toBe(201);
    const [work] = await node.poll({ waitMs: 2000 });
    if (!work) throw new Error('no work');
    expect(meteringBound({ type: 'job', kind: 1, model: MODEL, inputs: PROMPTS, timeoutSeconds: 300, cores: 8 })).toBe(
      1_255_900,
    );
    const done = await node.complete(work, JSON.stringify({ results: [{ index: 0, content: 'x' }] }), UNITS);
    expect(done.statusCode, done.body).toBe(200);
  }

  const topupRows = async (orgId: string) =>
    (
      await t.ctx.db.query<{ tx_type: string; amount_cents: number; free_micro: number; ref: string }>(
        "SELECT tx_type, amount_cents, free_micro, ref FROM credit_transactions WHERE org_id = $1 AND tx_type LIKE 'topup%' ORDER BY seq",
        [orgId],
      )
    ).rows;
  const topupView = async (buyer: TestBuyer, id: string) =>
    (await t.app.inject({ method: 'GET', url: `/api/v1/billing/topups/${id}`, headers: bearer(buyer.apiKey) })).json();

  it('the probe: a buyer pays its own checkout, spends it on its own node, and the payout run queues nothing from it', async () => {
    const self = await selfDealer('IS');
    const topupId = await payLocalTopup(t.app, self.buyer, 1_000);
    expect(await topupView(self.buyer, topupId)).toMatchObject({ status: 'paid', confirmed_at: null });
    // Spendable (the balance has it), but promotional, like the sign-up grant.
    expect(await topupRows(self.buyer.orgId)).toEqual([
      { tx_type: 'topup', amount_cents: 1_000, free_micro: 10_000_000, ref: topupId },
    ]);
    expect((await t.ctx.ledger.balance(self.buyer.orgId)).available_cents).toBe(1_500);

    await spendOnOwnNode(self, 'IS', 15);
    expect(await payableEarnings(t.ctx.db, self.buyer.orgId)).toMatchObject({
      earned_micro: 12_750_000,
      non_payable_micro: 12_750_000,
      payable_cents: 0,
    });
    expect((await runPayouts(deps)).created.filter((p) => p.org_id === self.buyer.orgId)).toEqual([]);
    expect(await reconcileAccount(t.ctx.db, self.buyer.orgId)).toMatchObject({ consistent: true });
  });

  it('once an administrator confirms it, it is paid credit: spent on its own node, the payout run queues 85 % of it', async () => {
    const self = await selfDealer('LU');
    const topupId = await payLocalTopup(t.app, self.buyer, 1_000);
    const { topup, confirmation } = await confirmTopup(deps, topupId);
    expect(topup.confirmed_at).toBeInstanceOf(Date);
    expect(confirmation).toMatchObject({
      confirmed_micro: 10_000_000,
      transaction: { tx_type: 'topup_confirmed', amount_cents: 0, free_micro: -10_000_000, ref: topupId },
    });
    expect((await topupView(self.buyer, topupId)).confirmed_at).toEqual(topup.confirmed_at?.toISOString());

    // The grant (500, promotional) is spent first, then the confirmed 1,000: 85 % of those are payable.
    await spendOnOwnNode(self, 'LU', 15);
    expect((await payableEarnings(t.ctx.db, self.buyer.orgId)).payable_cents).toBe(850);
    const created = (await runPayouts(deps)).created.filter((p) => p.org_id === self.buyer.orgId);
    expect(created.map((p) => p.amount_cents)).toEqual([850]);
    const audit = await reconcileAccount(t.ctx.db, self.buyer.orgId);
    expect(audit).toMatchObject({ consistent: true, balance_cents: 1_275 - 850 });
  });

  it('is confirmed once: a second confirmation, an unknown, a pending or a failed top-up is refused and changes nothing', async () => {
    const buyer = await signUp(t.app);
    const topupId = await payLocalTopup(t.app, buyer, 600);
    const [first, second] = await Promise.allSettled([confirmTopup(deps, topupId), confirmTopup(deps, topupId)]);
    const outcomes = [first, second].map((r) => r.status).sort();
    expect(outcomes).toEqual(['fulfilled', 'rejected']);
    const refused = [first, second].find((r) => r.status === 'rejected');
    expect(refused?.status === 'rejected' && refused.reason).toMatchObject({
      code: 'conflict',
      message: expect.stringMatching(new RegExp(`^top-up ${topupId} is already confirmed \\(\\d{4}-`)),
    });
    await expect(confirmTopup(deps, 'topup_nope')).rejects.toMatchObject({
      code: 'not_found',
      message: 'top-up topup_nope not found',
    });
    const pending = (
      await t.app.inject({
        method: 'POST',
        url: '/api/v1/billing/topups',
        headers: bearer(buyer.apiKey),
        payload: { amount_cents: 700 },
      })
    ).json().topup_id as string;
    await expect(confirmTopup(deps, pending)).rejects.toMatchObject({
      code: 'conflict',
      message: `top-up ${pending} is pending: only a paid top-up can be confirmed (its buyer completes the checkout first)`,
    });
    const checkout = (await topupView(buyer, pending)).checkout_url as string;
    await t.app.inject({
      method: 'POST',
      url: localPage(checkout),
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: 'action=cancel',
    });
    await expect(confirmTopup(deps, pending)).rejects.toMatchObject({
      code: 'conflict',
      message: expect.stringMatching(/ is failed: only a paid top-up can be confirmed/),
    });
    expect(await topupRows(buyer.orgId)).toEqual([
      { tx_type: 'topup', amount_cents: 600, free_micro: 6_000_000, ref: topupId },
      { tx_type: 'topup_confirmed', amount_cents: 0, free_micro: -6_000_000, ref: topupId },
    ]);
    const promo = await t.ctx.db.query<{ promo_micro: number }>(
      'SELECT promo_micro FROM credit_accounts WHERE org_id = $1',
      [buyer.orgId],
    );
    // What is left promotional is the sign-up grant.
    expect(promo.rows[0]?.promo_micro).toBe(5_000_000);
    expect(await reconcileAccount(t.ctx.db, buyer.orgId)).toMatchObject({ consistent: true, balance_cents: 1_100 });
  });
});

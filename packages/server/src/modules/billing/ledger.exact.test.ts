import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { meteringBound } from '@svc/protocol';
import {
  bearer,
  createKey,
  createTestApp,
  createTestNode,
  signUp,
  type TestApp,
  type TestBuyer,
} from '../../../test/harness.js';
import { payableEarnings, reconcileAccount } from './service.js';

interface Row {
  tx_type: string;
  amount_cents: number;
  amount_micro: number;
  free_micro: number;
  hold_cents: number;
  ref: string;
}

/**
 * Every hold, charge, release and earning is its own ledger row with its exact amount, and the
 * part of a charge paid with free-tier credit earns the operator nothing payable (docs/billing.md).
 */
describe('ledger: exact rows per job, and where free-tier credit can go', () => {
  let t: TestApp;
  let operator: TestBuyer;
  let operatorKey: string;
  beforeAll(async () => {
    t = await createTestApp();
    operator = await signUp(t.app);
    operatorKey = await createKey(t.app, operator, ['operator']);
  });
  afterAll(() => t.close());

  /**
   * Submits a kind 1 job of `prompts` prompts, lets a node priced 0.5 micro-CAD per token run it
   * for `units` tokens. The receipt must stay within the job's metering bound (docs/receipts.md):
   * a model with a large context (a completion of up to 32,768 tokens per prompt) and enough
   * prompts make the units these tests charge possible.
   */
  async function runJob(buyer: TestBuyer, units: number, budget: number, prompts = 1) {
    const model = 'svc-llama-3.2-3b';
    const inputs = Array.from({ length: prompts }, () => 'a prompt');
    const bound = meteringBound({ type: 'job', kind: 1, model, inputs, timeoutSeconds: 300, cores: 8 });
    expect(bound).toBeGreaterThanOrEqual(units);
    const node = await createTestNode(t.app, operatorKey, { models: [model], price_micro_per_unit: { '1': 0.5 } });
    const submit = await t.app.inject({
      method: 'POST',
      url: '/api/v1/marketplace/jobs',
      headers: bearer(buyer.apiKey),
      payload: {
        kind: 1,
        budget,
        max_price_per_unit: 0.000001,
        currency: 'CAD',
        model,
        inline_text: inputs.map((i) => `${i}\n`).join(''),
      },
    });
    expect(submit.statusCode).toBe(201);
    const jobId = submit.json().job_id as string;
    const [work] = await node.poll({ waitMs: 2000 });
    if (!work) throw new Error('no work');
    expect(
      (await node.complete(work, JSON.stringify({ results: [{ index: 0, content: 'ok' }] }), units)).statusCode,
    ).toBe(200);
    return jobId;
  }

  it('a job costing 0.0018 CAD shows its hold, charge and release in the audit with amount_micro, and charged_micro on the job', async () => {
    const buyer = await signUp(t.app);
    const before = await payableEarnings(t.ctx.db, operator.orgId);
    const jobId = await runJob(buyer, 3_600, 0.01);

    const job = (
      await t.app.inject({ method: 'GET', url: `/api/v1/marketplace/jobs/${jobId}`, headers: bearer(buyer.apiKey) })
    ).json();
    expect(job).toMatchObject({ status: 'completed', charged_cents: 0, charged_micro: 1_800, charged: 0.0018 });

    const audit = (
      await t.app.inject({
        method: 'GET',
        url: `/api/v1/marketplace/jobs/${jobId}/audit`,
        headers: bearer(buyer.apiKey),
      })
    ).json();
    const rows = (audit.credit_ledger as Row[]).map((r) => [
      r.tx_type,
      r.amount_cents,
      r.amount_micro,
      r.free_micro,
      r.hold_cents,
      r.ref,
    ]);
    expect(rows).toEqual([
      ['hold', 0, 0, 0, 1, jobId],
      // Paid with free-tier credit (spent first): the whole charge is free_micro.
      ['charge', 0, -1_800, -1_800, 0, jobId],
      ['release', 0, 0, 0, -1, jobId],
    ]);
    // The operator's earning row: 85 % of 1,800 µ, all of it from free-tier credit, so none payable.
    const { rows: earned } = await t.ctx.db.query<Row>(
      'SELECT tx_type, amount_cents, amount_micro, free_micro, hold_cents, ref FROM credit_transactions WHERE org_id = $1 AND ref = $2',
      [operator.orgId, jobId],
    );
    expect(earned).toEqual([
      { tx_type: 'earning', amount_cents: 0, amount_micro: 1_530, free_micro: 1_530, hold_cents: 0, ref: jobId },
    ]);
    const after = await payableEarnings(t.ctx.db, operator.orgId);
    expect(after.payable_earned_micro - before.payable_earned_micro).toBe(0);
    expect(after.non_payable_micro - before.non_payable_micro).toBe(1_530);

    const requests = (
      await t.app.inject({ method: 'GET', url: '/api/v1/billing/transactions', headers: bearer(buyer.apiKey) })
    ).json();
    expect(requests.transactions[1]).toMatchObject({ tx_type: 'charge', amount_micro: -1_800, amount: -0.0018 });
    expect((await reconcileAccount(t.ctx.db, buyer.orgId)).consistent).toBe(true);
  });

  it('free-tier credit is spent first; only the paid part of a charge becomes payable earnings', async () => {
    const op = await signUp(t.app);
    operatorKey = await createKey(t.app, op, ['operator']);
    const buyer = await signUp(t.app);
    await t.ctx.ledger.credit(buyer.orgId, 1_000, { txType: 'topup', description: 'card payment' });
    // 12,000,000 tokens at 0.5 µ = 6.00 CAD: 5.00 from the free tier, 1.00 paid. 364 prompts
    // bound the receipt at 364 x 33,048 = 12,029,472 tokens.
    const jobId = await runJob(buyer, 12_000_000, 7, 364);
    const audit = (
      await t.app.inject({
        method: 'GET',
        url: `/api/v1/marketplace/jobs/${jobId}/audit`,
        headers: bearer(buyer.apiKey),
      })
    ).json();
    expect((audit.credit_ledger as Row[]).find((r) => r.tx_type === 'charge')).toMatchObject({
      amount_cents: -600,
      amount_micro: -6_000_000,
      free_micro: -5_000_000,
    });
    const payable = await payableEarnings(t.ctx.db, op.orgId);
    // Earned 85 % of 6.00 = 5.10 CAD; 85 % of the 5.00 free part (4.25) is promotional; 0.85 payable.
    expect(payable).toEqual({
      earned_micro: 5_100_000,
      non_payable_micro: 4_250_000,
      payable_earned_micro: 850_000,
      paid_out_cents: 0,
      payable_cents: 85,
      payable: 0.85,
    });
    const earnings = (
      await t.app.inject({ method: 'GET', url: '/api/v1/nodes/earnings', headers: bearer(operatorKey) })
    ).json();
    expect(earnings).toMatchObject({ payable_cents: 85, payable: 0.85, non_payable_micro: 4_250_000 });
    // The operator's balance holds its earning, but the promotional part stays promotional: spent
    // first on its own jobs, it never turns into payable credit.
    expect((await reconcileAccount(t.ctx.db, op.orgId)).consistent).toBe(true);
  });
});

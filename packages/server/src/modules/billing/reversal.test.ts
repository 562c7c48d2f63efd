import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, signUp, type TestApp } from '../../../test/harness.js';
import { ApiError } from '../../platform/errors.js';
import { createLedger, payableEarnings, reconcileAccount, type Ledger } from './service.js';
import { earningTotals, ledgerOfRefAllOrgs, listLedger, readAccount } from './store.js';

/**
 * A settled charge taken back (`ledger.reverse`, billing/reversal.ts): the buyer gets the exact
 * charge back, the operator's earning leaves its balance and never becomes payable, also when it
 * was paid out already or a payout runs at the same time, and nothing is reversed twice. What the
 * operator's balance no longer held is a debt: not spendable, paid first from its next credits.
 */
describe('ledger: reversing a settled charge', () => {
  let t: TestApp;
  let ledger: Ledger;
  beforeAll(async () => {
    t = await createTestApp();
    ledger = createLedger(t.ctx.db);
  });
  afterAll(() => t.close());

  /** A buyer with 2,500 cents of paid credit (its grant confirmed, 2,000 topped up) and an operator with its grant. */
  async function parties() {
    const buyer = (await signUp(t.app)).orgId;
    await ledger.confirmCredit(buyer, 500, { txType: 'topup_confirmed' });
    await ledger.credit(buyer, 2_000, { txType: 'topup' });
    return { buyer, operator: (await signUp(t.app)).orgId };
  }

  /** A job's money as jobs/completion.ts moves it: hold `holdCents`, settle `usageMicro`, the operator's earning. */
  async function settledJob(buyer: string, operator: string, usageMicro: number, holdCents = 1_500) {
    const ref = `job_${Math.random().toString(36).slice(2)}`;
    const { holdId } = await ledger.hold(buyer, holdCents, ref);
    const settlement = await ledger.settle(holdId, usageMicro, { ref });
    await ledger.earn(operator, settlement, { ref });
    return ref;
  }

  const consistent = async (...orgs: string[]) => {
    for (const org of orgs) expect((await reconcileAccount(t.ctx.db, org)).consistent).toBe(true);
  };

  it('gives the buyer the exact charge back (balance and carry) and takes the earning back; a second call writes nothing', async () => {
    const { buyer, operator } = await parties();
    // A sub-cent usage first, so the job's charge rounds with a carry.
    await ledger.charge(buyer, 6_667, { ref: 'req_before' });
    const before = { buyer: await readAccount(t.ctx.db, buyer), operator: await readAccount(t.ctx.db, operator) };
    const payableBefore = await payableEarnings(t.ctx.db, operator);
    const ref = await settledJob(buyer, operator, 10_003_333);
    expect((await payableEarnings(t.ctx.db, operator)).payable_cents).toBe(850);

    const reversal = await ledger.reverse(ref, { description: `job ${ref} proven false` });
    expect(reversal?.refunds.map((r) => [r.tx_type, r.amount_cents, r.amount_micro, r.free_micro])).toEqual([
      ['refund', 1_001, 10_003_333, 0],
    ]);
    expect(reversal?.earning_reversals.map((r) => [r.tx_type, r.amount_cents, r.amount_micro])).toEqual([
      ['earning_reversal', -850, -8_502_833],
    ]);
    expect(reversal?.owed_cents).toBe(0);
    expect(await readAccount(t.ctx.db, buyer)).toEqual(before.buyer);
    expect(await readAccount(t.ctx.db, operator)).toEqual(before.operator);
    expect(await payableEarnings(t.ctx.db, operator)).toEqual(payableBefore);
    await consistent(buyer, operator);

    expect(await ledger.reverse(ref, { description: 'again' })).toBeUndefined();
    expect((await ledgerOfRefAllOrgs(t.ctx.db, ref)).map((r) => r.tx_type)).toEqual([
      'hold',
      'charge',
      'release',
      'earning',
      'refund',
      'earning_reversal',
    ]);
    expect(await readAccount(t.ctx.db, buyer)).toEqual(before.buyer);
    expect(await ledger.reverse('job_never_charged', { description: 'nothing' })).toBeUndefined();
  });

  it('gives free-tier credit back as free-tier credit, and takes the promotional earning back', async () => {
    const buyer = (await signUp(t.app)).orgId;
    const operator = (await signUp(t.app)).orgId;
    const before = { buyer: await readAccount(t.ctx.db, buyer), operator: await readAccount(t.ctx.db, operator) };
    const ref = await settledJob(buyer, operator, 1_000_000, 200);
    expect((await readAccount(t.ctx.db, buyer))?.promo_micro).toBe(4_000_000);
    await ledger.reverse(ref, { description: 'proven false' });
    expect(await readAccount(t.ctx.db, buyer)).toEqual(before.buyer);
    expect(await readAccount(t.ctx.db, operator)).toEqual(before.operator);
    await consistent(buyer, operator);
  });

  it('an earning paid out already is withheld from the next payouts; what the balance no longer held is a debt', async () => {
    const { buyer, operator } = await parties();
    const ref = await settledJob(buyer, operator, 10_000_000);
    const paid = await ledger.payOut(operator, { minimumCents: 1, description: 'payout', ref: 'po_1' });
    expect(paid?.cents).toBe(850);
    // Left: the operator's 500-cent grant, which the reversal takes; 350 cents are owed.
    const reversal = await ledger.reverse(ref, { description: 'proven false' });
    expect(reversal?.earning_reversals.map((r) => [r.amount_cents, r.debt_cents])).toEqual([[-500, 350]]);
    expect(reversal?.owed_cents).toBe(350);
    expect(await ledger.balance(operator)).toEqual({
      balance_cents: 0,
      held_cents: 0,
      debt_cents: 350,
      available_cents: 0,
      carry_micro: 0,
    });
    expect(await earningTotals(t.ctx.db, operator)).toEqual({ earned_micro: 0, free_micro: 0, paid_out_cents: 850 });
    await consistent(buyer, operator);
    // The next 850 cents earned pay the debt first (a debt_repayment row), and what was paid out
    // for the false work stays withheld: nothing is payable.
    const next = await settledJob(buyer, operator, 10_000_000);
    expect((await ledgerOfRefAllOrgs(t.ctx.db, next)).map((r) => [r.tx_type, r.amount_cents, r.debt_cents])).toEqual([
      ['hold', 0, 0],
      ['charge', -1_000, 0],
      ['release', 0, 0],
      ['earning', 850, 0],
      ['debt_repayment', -350, -350],
    ]);
    expect(await ledger.balance(operator)).toMatchObject({ balance_cents: 500, debt_cents: 0, available_cents: 500 });
    expect((await payableEarnings(t.ctx.db, operator)).payable_cents).toBe(0);
    expect(await ledger.payOut(operator, { minimumCents: 1, description: 'payout', ref: 'po_2' })).toBeUndefined();
    // And the one after is paid.
    await settledJob(buyer, operator, 10_000_000);
    expect((await payableEarnings(t.ctx.db, operator)).payable_cents).toBe(850);
    await consistent(buyer, operator);
  });

  it('a payout running at the same time never pays the reversed earning without withholding it', async () => {
    const cases = await Promise.all(
      Array.from({ length: 6 }, async () => {
        const { buyer, operator } = await parties();
        return { buyer, operator, ref: await settledJob(buyer, operator, 10_000_000) };
      }),
    );
    const outcomes = await Promise.all(
      cases.map(async (c) => {
        const [paid] = await Promise.all([
          ledger.payOut(c.operator, { minimumCents: 1, description: 'payout', ref: `po_${c.ref}` }),
          ledger.reverse(c.ref, { description: 'proven false' }),
        ]);
        return { ...c, paid: paid?.cents ?? 0 };
      }),
    );
    for (const o of outcomes) {
      const totals = await earningTotals(t.ctx.db, o.operator);
      // Either order: the earning is gone from the payable sum, and what a payout took of it is owed.
      expect([totals.earned_micro, totals.paid_out_cents]).toEqual([0, o.paid]);
      expect((await payableEarnings(t.ctx.db, o.operator)).payable_cents).toBe(0);
      await consistent(o.buyer, o.operator);
    }
  });

  /** An operator whose 850-cent earning on a job was paid out, then reversed: it owes 850 cents and holds nothing. */
  async function indebted() {
    const { buyer, operator } = await parties();
    // The grant spent first, so the payout leaves nothing behind.
    await ledger.charge(operator, 5_000_000, { ref: 'req_grant' });
    const ref = await settledJob(buyer, operator, 10_000_000);
    expect((await ledger.payOut(operator, { minimumCents: 1, description: 'payout', ref: `po_${ref}` }))?.cents).toBe(
      850,
    );
    expect((await ledger.reverse(ref, { description: 'proven false' }))?.owed_cents).toBe(850);
    return { buyer, operator };
  }

  const refusal = (p: Promise<unknown>) =>
    p.then(
      () => 'accepted',
      (err: unknown) => (err instanceof ApiError ? `${err.status} ${err.message}` : String(err)),
    );

  it('a debt is not spendable: jobs, charges and reservations on it are refused 402 as on an empty balance', async () => {
    const { buyer, operator } = await parties();
    await ledger.charge(operator, 5_000_000, { ref: 'req_grant' });
    const ref = await settledJob(buyer, operator, 10_000_000);
    await ledger.payOut(operator, { minimumCents: 1, description: 'payout', ref: `po_${ref}` });
    // 300 cents topped up, all held by a job while the earning paid out is reversed: all of it owed.
    await ledger.credit(operator, 300, { txType: 'topup', ref: 'pay_1' });
    const { holdId } = await ledger.hold(operator, 300, 'job_running');
    expect((await ledger.reverse(ref, { description: 'proven false' }))?.owed_cents).toBe(850);
    await ledger.release(holdId);
    // The 300 cents are free on the balance again, and the debt claims them.
    expect(await ledger.balance(operator)).toEqual({
      balance_cents: 300,
      held_cents: 0,
      debt_cents: 850,
      available_cents: 0,
      carry_micro: 0,
    });
    const insufficient = '402 insufficient credits: 0 cents available, 1 cents needed; top up or lower the budget';
    expect(await refusal(ledger.hold(operator, 1, 'job_more'))).toBe(insufficient);
    expect(await refusal(ledger.charge(operator, 10_000, { ref: 'req_more' }))).toBe(insufficient);
    expect(await refusal(t.ctx.reservations.take(operator, 1))).toMatch(/^402 insufficient credits: 0 cents available/);
    expect((await payableEarnings(t.ctx.db, operator)).payable_cents).toBe(0);
    await consistent(buyer, operator);
  });

  it('the next credits pay a debt first: a top-up, then an earning, each followed by its debt_repayment row', async () => {
    const { buyer, operator } = await indebted();
    await ledger.credit(operator, 300, { txType: 'topup', ref: 'pay_1' });
    expect(await ledger.balance(operator)).toMatchObject({ balance_cents: 0, debt_cents: 550, available_cents: 0 });
    await settledJob(buyer, operator, 10_000_000);
    expect(await ledger.balance(operator)).toMatchObject({ balance_cents: 300, debt_cents: 0, available_cents: 300 });
    const rows = (await listLedger(t.ctx.db, operator, { limit: 50, offset: 0 })).reverse();
    expect(rows.slice(-6).map((r) => [r.tx_type, r.amount_cents, r.debt_cents, r.balance_after])).toEqual([
      ['payout', -850, 0, 0],
      ['earning_reversal', 0, 850, 0],
      ['topup', 300, 0, 300],
      ['debt_repayment', -300, -300, 0],
      ['earning', 850, 0, 850],
      ['debt_repayment', -550, -550, 300],
    ]);
    // The rows sum to the balance and to the debt.
    expect(rows.reduce((sum, r) => sum + r.amount_cents, 0)).toBe(300);
    expect(rows.reduce((sum, r) => sum + r.debt_cents, 0)).toBe(0);
    await consistent(buyer, operator);
  });

  it('a payout and a charge running alongside the reversal: whatever the order, the whole earning leaves the operator', async () => {
    const orders = [
      ['reverse', 'payout', 'charge'],
      ['payout', 'reverse', 'charge'],
      ['charge', 'reverse', 'payout'],
      ['charge', 'payout', 'reverse'],
      ['payout', 'charge', 'reverse'],
      ['reverse', 'charge', 'payout'],
    ] as const;
    const outcomes = await Promise.all(
      orders.map(async (order) => {
        const { buyer, operator } = await parties();
        const ref = await settledJob(buyer, operator, 10_000_000);
        const before = await ledger.balance(operator);
        const start = {
          reverse: () => ledger.reverse(ref, { description: 'proven false' }).then((r) => r?.owed_cents ?? 0),
          payout: () =>
            ledger
              .payOut(operator, { minimumCents: 1, description: 'payout', ref: `po_${ref}` })
              .then((p) => p?.cents ?? 0),
          charge: () =>
            ledger.charge(operator, 6_000_000, { ref: `req_${ref}` }).then(
              (c) => c.charged_cents,
              (err: unknown) => {
                if (err instanceof ApiError && err.code === 'insufficient_credits') return 0;
                throw err;
              },
            ),
        };
        const results = await Promise.all(order.map((name) => start[name]()));
        const got = Object.fromEntries(order.map((name, i) => [name, results[i] ?? 0]));
        return { buyer, operator, before, paid: got.payout ?? 0, charged: got.charge ?? 0, owed: got.reverse ?? 0 };
      }),
    );
    for (const o of outcomes) {
      const after = await ledger.balance(o.operator);
      // The 850-cent earning left in full: from the balance, or as a debt for what was paid out or spent.
      expect(after.balance_cents - after.debt_cents).toBe(o.before.balance_cents - o.paid - o.charged - 850);
      expect(after.debt_cents).toBe(o.owed);
      expect(after.balance_cents).toBeGreaterThanOrEqual(0);
      expect((await payableEarnings(t.ctx.db, o.operator)).payable_cents).toBe(0);
      await consistent(o.buyer, o.operator);
    }
  });

  it('a reversal and a job completion between two organizations in opposite roles lock in one order (no deadlock on PostgreSQL)', async () => {
    const pairs = await Promise.all(
      Array.from({ length: 8 }, async () => {
        const { buyer, operator } = await parties();
        const reversed = await settledJob(buyer, operator, 10_000_000);
        // The other way round: the operator buys from the buyer's node, its job's hold still open.
        await ledger.credit(operator, 2_000, { txType: 'topup' });
        const completing = `job_${Math.random().toString(36).slice(2)}`;
        const { holdId } = await ledger.hold(operator, 1_500, completing);
        return { buyer, operator, reversed, completing, holdId };
      }),
    );
    // As jobs/completion.ts completes a job: its settlement and its operator's earning in one transaction.
    const complete = (p: (typeof pairs)[number]) =>
      t.ctx.db.transaction((tx) =>
        ledger
          .within(tx)
          .settleAndEarn(
            p.holdId,
            10_000_000,
            { ref: p.completing },
            { orgId: p.buyer, options: { ref: p.completing } },
          ),
      );
    const results = await Promise.allSettled(
      pairs.flatMap((p) => [ledger.reverse(p.reversed, { description: 'proven false' }), complete(p)]),
    );
    expect(results.filter((r) => r.status === 'rejected').map((r) => String(r.reason))).toEqual([]);
    for (const p of pairs) {
      expect((await ledgerOfRefAllOrgs(t.ctx.db, p.completing)).map((r) => r.tx_type)).toEqual([
        'hold',
        'charge',
        'release',
        'earning',
      ]);
      await consistent(p.buyer, p.operator);
    }
  });
});

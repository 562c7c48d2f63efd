import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, signUp, type TestApp } from '../../../test/harness.js';
import { createLedger, payableEarnings, reconcileAccount, type Ledger } from './service.js';
import { earningTotals, ledgerOfRefAllOrgs, readAccount } from './store.js';

/**
 * A settled charge taken back (`ledger.reverse`, billing/reversal.ts): the buyer gets the exact
 * charge back, the operator's earning leaves its balance and never becomes payable, also when it
 * was paid out already or a payout runs at the same time, and nothing is reversed twice.
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

  it('an earning paid out already is withheld from the next payouts; what the balance no longer held is owed', async () => {
    const { buyer, operator } = await parties();
    const ref = await settledJob(buyer, operator, 10_000_000);
    const paid = await ledger.payOut(operator, { minimumCents: 1, description: 'payout', ref: 'po_1' });
    expect(paid?.cents).toBe(850);
    // Left: the operator's 500-cent grant, which the reversal takes; 350 cents are owed.
    const reversal = await ledger.reverse(ref, { description: 'proven false' });
    expect(reversal?.earning_reversals.map((r) => r.amount_cents)).toEqual([-500]);
    expect(reversal?.owed_cents).toBe(350);
    expect((await readAccount(t.ctx.db, operator))?.balance_cents).toBe(0);
    expect(await earningTotals(t.ctx.db, operator)).toEqual({ earned_micro: 0, free_micro: 0, paid_out_cents: 850 });
    // The next 850 cents earned pay back what was paid out for the false work: nothing is payable.
    await settledJob(buyer, operator, 10_000_000);
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
});

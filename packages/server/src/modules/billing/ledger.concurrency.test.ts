import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, signUp, type TestApp } from '../../../test/harness.js';
import { ApiError } from '../../platform/errors.js';
import { createLedger, reconcileAccount, type Ledger } from './service.js';
import { listLedger } from './store.js';

const N = 200;

/** Splits settled promises into values and the error codes of the rejections. */
function outcome<T>(results: PromiseSettledResult<T>[]) {
  const ok = results.filter((r): r is PromiseFulfilledResult<T> => r.status === 'fulfilled').map((r) => r.value);
  const errors = results
    .filter((r): r is PromiseRejectedResult => r.status === 'rejected')
    .map((r) => r.reason as unknown);
  return { ok, codes: errors.map((e) => (e instanceof ApiError ? e.code : String(e))) };
}

describe(`ledger: ${N} concurrent operations on one balance`, () => {
  let t: TestApp;
  let ledger: Ledger;
  beforeAll(async () => {
    t = await createTestApp();
    ledger = createLedger(t.ctx.db);
  });
  afterAll(() => t.close());

  /** An organization with exactly 1,000 cents (500 free tier + 500 top-up) and carry 0. */
  async function orgWith1000(): Promise<string> {
    const org = (await signUp(t.app)).orgId;
    await ledger.credit(org, 500, { txType: 'topup' });
    return org;
  }

  it('charges: exactly floor(balance / charge) succeed, the rest are 402, and the balance never goes below zero', async () => {
    const org = await orgWith1000();
    const results = await Promise.allSettled(
      Array.from({ length: N }, (_, i) => ledger.charge(org, 700_000, { ref: `req_${i}` })),
    );
    const { ok, codes } = outcome(results);
    expect(ok).toHaveLength(Math.floor(1_000 / 70)); // 14
    expect(codes).toEqual(Array(N - 14).fill('insufficient_credits'));
    expect(await ledger.balance(org)).toEqual({
      balance_cents: 20,
      held_cents: 0,
      available_cents: 20,
      debt_cents: 0,
      carry_micro: 0,
    });
    const rows = await listLedger(t.ctx.db, org, { limit: 200, offset: 0 });
    expect(rows.filter((r) => r.tx_type === 'charge')).toHaveLength(14);
    // balance_after walks down by 70 without gaps or repeats: the charges were serialised.
    expect(rows.filter((r) => r.tx_type === 'charge').map((r) => r.balance_after)).toEqual(
      Array.from({ length: 14 }, (_, i) => 20 + 70 * i),
    );
    expect(Math.min(...rows.map((r) => r.balance_after))).toBeGreaterThanOrEqual(0);
    const audit = await reconcileAccount(t.ctx.db, org);
    expect([audit.balance_cents, audit.ledger_sum_cents, audit.consistent]).toEqual([20, 20, true]);
  });

  it('holds: exactly floor(balance / hold) succeed, the rest are 402, and holds never exceed the balance', async () => {
    const org = await orgWith1000();
    const results = await Promise.allSettled(Array.from({ length: N }, (_, i) => ledger.hold(org, 30, `job_${i}`)));
    const { ok, codes } = outcome(results);
    expect(ok).toHaveLength(Math.floor(1_000 / 30)); // 33
    expect(new Set(ok.map((h) => h.holdId)).size).toBe(33);
    expect(codes).toEqual(Array(N - 33).fill('insufficient_credits'));
    expect(await ledger.balance(org)).toEqual({
      balance_cents: 1_000,
      held_cents: 990,
      available_cents: 10,
      debt_cents: 0,
      carry_micro: 0,
    });
    const audit = await reconcileAccount(t.ctx.db, org);
    expect([audit.ledger_sum_cents, audit.active_holds_cents, audit.consistent]).toEqual([1_000, 990, true]);
  });

  it('settles of one hold: exactly one charges, the others are 409', async () => {
    const org = await orgWith1000();
    const { holdId } = await ledger.hold(org, 100);
    const results = await Promise.allSettled(Array.from({ length: N }, () => ledger.settle(holdId, 500_000)));
    const { ok, codes } = outcome(results);
    expect(ok.map((s) => [s.charged_cents, s.released_cents])).toEqual([[50, 50]]);
    expect(codes).toEqual(Array(N - 1).fill('conflict'));
    expect(await ledger.balance(org)).toEqual({
      balance_cents: 950,
      held_cents: 0,
      available_cents: 950,
      debt_cents: 0,
      carry_micro: 0,
    });
  });

  it('a mixed crowd of holds, settles, releases, charges and credits keeps every invariant', async () => {
    const org = await orgWith1000();
    const jobs = Array.from({ length: N }, async (_, i) => {
      switch (i % 4) {
        case 0: {
          const { holdId } = await ledger.hold(org, 40);
          return ledger.settle(holdId, 123_457 * (i % 7));
        }
        case 1: {
          const { holdId } = await ledger.hold(org, 25);
          return ledger.release(holdId);
        }
        case 2:
          return ledger.charge(org, 33_333);
        default:
          return i % 20 === 3 ? ledger.credit(org, 10, { txType: 'refund' }) : ledger.balance(org);
      }
    });
    const { codes } = outcome(await Promise.allSettled(jobs));
    expect(codes.every((c) => c === 'insufficient_credits')).toBe(true);
    const audit = await reconcileAccount(t.ctx.db, org);
    expect(audit.held_cents).toBe(0);
    expect(audit.balance_cents).toBe(audit.ledger_sum_cents);
    expect(audit.balance_cents).toBeGreaterThanOrEqual(0);
    expect(audit.consistent).toBe(true);
    const rows = await listLedger(t.ctx.db, org, { limit: 200, offset: 0 });
    // Each row's balance_after is the previous one plus its amount: one unbroken chain.
    const chain = [...rows].reverse();
    chain.forEach((row, k) => expect(row.balance_after).toBe((chain[k - 1]?.balance_after ?? 0) + row.amount_cents));
  });
});

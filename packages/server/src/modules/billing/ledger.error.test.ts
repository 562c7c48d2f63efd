import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestApp, signUp, type TestApp } from '../../../test/harness.js';
import { ApiError } from '../../platform/errors.js';
import { createLedger, reconcileAccount, type Ledger } from './service.js';

/** The ApiError a promise rejects with, or a failure. */
async function apiError(promise: Promise<unknown>): Promise<ApiError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(err instanceof ApiError)) throw new Error(`expected an ApiError, got ${String(err)}`);
  return err;
}

describe('ledger: refusals', () => {
  let t: TestApp;
  let ledger: Ledger;
  let org: string;
  beforeAll(async () => {
    t = await createTestApp();
    ledger = createLedger(t.ctx.db);
  });
  afterAll(() => t.close());
  beforeEach(async () => {
    org = (await signUp(t.app)).orgId;
  });

  it('a hold larger than the available balance is 402 saying available vs needed', async () => {
    const err = await apiError(ledger.hold(org, 501));
    expect([err.status, err.code, err.message]).toEqual([
      402,
      'insufficient_credits',
      'insufficient credits: 500 cents available, 501 cents needed; top up or lower the budget',
    ]);
    await ledger.hold(org, 450);
    expect((await apiError(ledger.hold(org, 51))).message).toContain('50 cents available, 51 cents needed');
    expect(await ledger.balance(org)).toMatchObject({ held_cents: 450, available_cents: 50 });
  });

  it('a charge the available balance cannot cover is 402 and changes nothing, carry included', async () => {
    await ledger.charge(org, 1_234);
    await ledger.hold(org, 400);
    const err = await apiError(ledger.charge(org, 1_010_000));
    expect(err.status).toBe(402);
    expect(err.message).toContain('100 cents available, 101 cents needed');
    expect(await ledger.balance(org)).toEqual({
      balance_cents: 500,
      held_cents: 400,
      available_cents: 100,
      debt_cents: 0,
      carry_micro: 1_234,
    });
    expect((await reconcileAccount(t.ctx.db, org)).consistent).toBe(true);
  });

  it('a hold settles or releases once: the second attempt is 409', async () => {
    const a = await ledger.hold(org, 100);
    await ledger.settle(a.holdId, 10_000);
    const twice = await apiError(ledger.settle(a.holdId, 10_000));
    expect([twice.status, twice.code, twice.message]).toEqual([409, 'conflict', `hold ${a.holdId} is already settled`]);
    expect((await apiError(ledger.release(a.holdId))).message).toBe(`hold ${a.holdId} is already settled`);
    const b = await ledger.hold(org, 100);
    await ledger.release(b.holdId);
    expect((await apiError(ledger.release(b.holdId))).status).toBe(409);
    expect((await apiError(ledger.settle(b.holdId, 0))).message).toBe(`hold ${b.holdId} is already released`);
    // Only the first settle charged.
    expect(await ledger.balance(org)).toEqual({
      balance_cents: 499,
      held_cents: 0,
      available_cents: 499,
      debt_cents: 0,
      carry_micro: 0,
    });
  });

  it('an unknown hold or organization is 404', async () => {
    expect((await apiError(ledger.settle('hold_nope', 1))).code).toBe('not_found');
    expect((await apiError(ledger.release('hold_nope'))).message).toBe('hold hold_nope not found');
    const ops = [
      () => ledger.hold('org_nope', 1),
      () => ledger.charge('org_nope', 1),
      () => ledger.credit('org_nope', 1, { txType: 'topup' }),
      () => ledger.earn('org_nope', { charged_micro: 10_000, free_micro: 0, charged_cents: 1 }, {}),
      () => ledger.balance('org_nope'),
    ];
    for (const op of ops) {
      const err = await apiError(op());
      expect([err.status, err.message]).toEqual([404, 'organization org_nope has no credit account']);
    }
  });

  it('rejects amounts that are not non-negative safe integers, and zero credits', async () => {
    const cases: [() => Promise<unknown>, string][] = [
      [() => ledger.hold(org, -1), 'cents must be an integer from 0'],
      [() => ledger.hold(org, 1.5), 'cents must be an integer from 0'],
      [() => ledger.charge(org, Number.NaN), 'usage_micro must be an integer from 0'],
      [() => ledger.charge(org, -10_000), 'usage_micro must be an integer from 0'],
      [() => ledger.charge(org, Number.MAX_SAFE_INTEGER), 'usage_micro must be an integer from 0'],
      [() => ledger.credit(org, 0, { txType: 'topup' }), 'cents must be an integer from 1'],
      [() => ledger.credit(org, 2 ** 53, { txType: 'topup' }), 'cents must be an integer from 1'],
      [() => ledger.credit(org, 5, { txType: 'Top up' }), 'tx_type must match'],
      [() => ledger.charge(org, 5, { description: 'x'.repeat(501) }), 'description must be at most 500 characters'],
    ];
    for (const [op, message] of cases) {
      const err = await apiError(op());
      expect(err.code).toBe('invalid_request');
      expect(err.message).toContain(message);
    }
    expect(await ledger.balance(org)).toEqual({
      balance_cents: 500,
      held_cents: 0,
      available_cents: 500,
      debt_cents: 0,
      carry_micro: 0,
    });
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, signUp, type TestApp } from '../../../test/harness.js';
import { createLedger, reconcileAccount, type Ledger } from './service.js';
import { listLedger } from './store.js';

describe('ledger: happy paths with exact numbers', () => {
  let t: TestApp;
  let ledger: Ledger;
  beforeAll(async () => {
    t = await createTestApp();
    ledger = createLedger(t.ctx.db);
  });
  afterAll(() => t.close());

  /** A fresh organization: 500 cents of free tier, carry 0. */
  const freshOrg = async () => (await signUp(t.app)).orgId;
  const rows = (orgId: string) => listLedger(t.ctx.db, orgId, { limit: 200, offset: 0 });
  const expectConsistent = async (orgId: string) =>
    expect((await reconcileAccount(t.ctx.db, orgId)).consistent).toBe(true);

  it('a new organization holds its free tier and nothing else', async () => {
    const org = await freshOrg();
    expect(await ledger.balance(org)).toEqual({
      balance_cents: 500,
      held_cents: 0,
      available_cents: 500,
      debt_cents: 0,
      carry_micro: 0,
    });
    expect((await rows(org)).map((r) => [r.tx_type, r.amount_cents, r.balance_after])).toEqual([
      ['free_tier', 500, 500],
    ]);
  });

  it('reads a balance in one statement, outside any transaction', async () => {
    const org = await freshOrg();
    const db = t.ctx.db;
    const calls: string[] = [];
    const spied = {
      ...db,
      query: ((sql: string, params?: readonly unknown[]) => (
        calls.push(sql),
        db.query(sql, params)
      )) as typeof db.query,
      transaction: ((fn) => (calls.push('BEGIN'), db.transaction(fn))) as typeof db.transaction,
    };
    expect(await createLedger(spied).balance(org)).toMatchObject({ available_cents: 500 });
    expect(calls).toHaveLength(1);
    expect(calls[0]).toMatch(/^SELECT .* FROM credit_accounts WHERE org_id = \$1$/);
  });

  it('credit and earn write two statements each: the account update (the lock, RETURNING the balance), then the row', async () => {
    const org = await freshOrg();
    const calls: string[] = [];
    await t.ctx.db.transaction(async (tx) => {
      const spied = {
        ...tx,
        query: ((sql: string, params?: readonly unknown[]) => (
          calls.push(sql),
          tx.query(sql, params)
        )) as typeof tx.query,
      };
      await ledger.within(spied).credit(org, 7, { txType: 'topup' });
      await ledger.within(spied).earn(org, { charged_micro: 100_000, free_micro: 0, charged_cents: 10 }, {});
    });
    expect(calls.map((sql) => sql.trim().split(/\s+/).slice(0, 3).join(' '))).toEqual([
      'UPDATE credit_accounts SET',
      'INSERT INTO credit_transactions',
      'UPDATE credit_accounts SET',
      'INSERT INTO credit_transactions',
    ]);
    expect(await ledger.balance(org)).toMatchObject({ balance_cents: 500 + 7 + 8 });
    await expectConsistent(org);
  });

  it('hold reserves part of the balance with a row that moves no cents (hold_cents +200)', async () => {
    const org = await freshOrg();
    const { holdId } = await ledger.hold(org, 200, 'job_a');
    expect(holdId).toMatch(/^hold_[0-9a-z]{26}$/);
    expect(await ledger.balance(org)).toEqual({
      balance_cents: 500,
      held_cents: 200,
      available_cents: 300,
      debt_cents: 0,
      carry_micro: 0,
    });
    expect((await rows(org))[0]).toMatchObject({
      tx_type: 'hold',
      amount_cents: 0,
      amount_micro: 0,
      hold_cents: 200,
      balance_after: 500,
      ref: 'job_a',
    });
    await expectConsistent(org);
  });

  it('settle charges the usage with the carry, releases the rest: a charge row and a release row', async () => {
    const org = await freshOrg();
    const { holdId } = await ledger.hold(org, 200, 'job_b');
    const s = await ledger.settle(holdId, 1_234_567, { description: 'job job_b' });
    expect(s).toMatchObject({
      charged_cents: 123,
      charged_micro: 1_234_567,
      free_micro: 1_234_567,
      released_cents: 77,
    });
    expect(s.transaction).toMatchObject({
      tx_type: 'charge',
      amount_cents: -123,
      amount_micro: -1_234_567,
      free_micro: -1_234_567,
      balance_after: 377,
      description: 'job job_b',
      ref: 'job_b',
    });
    expect(s.release).toMatchObject({
      tx_type: 'release',
      amount_cents: 0,
      hold_cents: -200,
      balance_after: 377,
      ref: 'job_b',
    });
    expect(await ledger.balance(org)).toEqual({
      balance_cents: 377,
      held_cents: 0,
      available_cents: 377,
      debt_cents: 0,
      carry_micro: 4_567,
    });
    // The carried 4,567 µ makes the next 5,433 µ exactly one cent.
    const next = await ledger.charge(org, 5_433, { ref: 'req_1' });
    expect(next).toMatchObject({ charged_cents: 1, carry_micro: 0 });
    expect(next.transaction).toMatchObject({ amount_cents: -1, balance_after: 376, ref: 'req_1' });
    expect((await rows(org)).map((r) => [r.tx_type, r.amount_cents, r.amount_micro, r.hold_cents])).toEqual([
      ['charge', -1, -5_433, 0],
      ['release', 0, 0, -200],
      ['charge', -123, -1_234_567, 0],
      ['hold', 0, 0, 200],
      ['free_tier', 500, 5_000_000, 0],
    ]);
    await expectConsistent(org);
  });

  it('settle under a cent writes a 0-cent charge row with the exact amount, keeps the carry and releases the whole hold', async () => {
    const org = await freshOrg();
    const { holdId } = await ledger.hold(org, 50);
    expect(await ledger.settle(holdId, 9_999)).toMatchObject({
      charged_cents: 0,
      charged_micro: 9_999,
      released_cents: 50,
      transaction: { amount_cents: 0, amount_micro: -9_999, ref: holdId },
    });
    expect(await ledger.balance(org)).toEqual({
      balance_cents: 500,
      held_cents: 0,
      available_cents: 500,
      debt_cents: 0,
      carry_micro: 9_999,
    });
    expect((await rows(org)).map((r) => r.tx_type)).toEqual(['release', 'charge', 'hold', 'free_tier']);
    await expectConsistent(org);
  });

  it('settle caps the charge at the hold and resets the carry (the hold is the budget)', async () => {
    const org = await freshOrg();
    await ledger.charge(org, 5_000);
    const { holdId } = await ledger.hold(org, 100, 'job_c');
    const s = await ledger.settle(holdId, 3_000_000);
    expect(s).toMatchObject({ charged_cents: 100, released_cents: 0 });
    expect(s.transaction).toMatchObject({ amount_cents: -100, balance_after: 400 });
    expect(await ledger.balance(org)).toEqual({
      balance_cents: 400,
      held_cents: 0,
      available_cents: 400,
      debt_cents: 0,
      carry_micro: 0,
    });
    await expectConsistent(org);
  });

  it('settle takes its tx_type, description and ref from the caller, the ref defaulting to the hold id', async () => {
    const org = await freshOrg();
    const a = await ledger.hold(org, 10);
    const sa = await ledger.settle(a.holdId, 20_000);
    expect(sa.transaction?.ref).toBe(a.holdId);
    const b = await ledger.hold(org, 10, 'req_x');
    const sb = await ledger.settle(b.holdId, 30_000, { txType: 'inference', description: 'chat phi-4', ref: 'req_y' });
    expect(sb.transaction).toMatchObject({
      tx_type: 'inference',
      description: 'chat phi-4',
      ref: 'req_y',
      amount_cents: -3,
      balance_after: 495,
    });
  });

  it('release returns the whole hold and charges nothing', async () => {
    const org = await freshOrg();
    const { holdId } = await ledger.hold(org, 321);
    expect(await ledger.release(holdId)).toEqual({ released_cents: 321 });
    expect(await ledger.balance(org)).toEqual({
      balance_cents: 500,
      held_cents: 0,
      available_cents: 500,
      debt_cents: 0,
      carry_micro: 0,
    });
    expect((await rows(org)).map((r) => [r.tx_type, r.amount_cents, r.hold_cents])).toEqual([
      ['release', 0, -321],
      ['hold', 0, 321],
      ['free_tier', 500, 0],
    ]);
    await expectConsistent(org);
  });

  it('three charges of 3,333 µ move no cents; the fourth moves the cent the carry reached; each has its row', async () => {
    const org = await freshOrg();
    const results = [];
    for (let i = 0; i < 4; i++) results.push(await ledger.charge(org, 3_333, { description: `request ${i}` }));
    expect(results.map((r) => [r.charged_cents, r.carry_micro])).toEqual([
      [0, 3_333],
      [0, 6_666],
      [0, 9_999],
      [1, 3_332],
    ]);
    expect(results.map((r) => [r.transaction?.amount_cents, r.transaction?.amount_micro])).toEqual([
      [0, -3_333],
      [0, -3_333],
      [0, -3_333],
      [-1, -3_333],
    ]);
    expect(await ledger.balance(org)).toEqual({
      balance_cents: 499,
      held_cents: 0,
      available_cents: 499,
      debt_cents: 0,
      carry_micro: 3_332,
    });
  });

  it('a charge may use the whole available balance but not the held part', async () => {
    const org = await freshOrg();
    await ledger.hold(org, 100);
    const c = await ledger.charge(org, 4_000_000);
    expect(c.transaction).toMatchObject({ amount_cents: -400, balance_after: 100 });
    expect(await ledger.balance(org)).toEqual({
      balance_cents: 100,
      held_cents: 100,
      available_cents: 0,
      debt_cents: 0,
      carry_micro: 0,
    });
    await expectConsistent(org);
  });

  it('credit adds a positive row with its type, description and ref', async () => {
    const org = await freshOrg();
    const row = await ledger.credit(org, 1_000, { txType: 'topup', description: 'card payment', ref: 'pi_123' });
    expect(row).toMatchObject({
      tx_type: 'topup',
      amount_cents: 1_000,
      balance_after: 1_500,
      description: 'card payment',
      ref: 'pi_123',
    });
    expect(row.id).toMatch(/^tx_/);
    await ledger.credit(org, 7, { txType: 'refund' });
    expect((await ledger.balance(org)).balance_cents).toBe(1_507);
    expect((await rows(org)).map((r) => [r.tx_type, r.amount_cents, r.balance_after])).toEqual([
      ['refund', 7, 1_507],
      ['topup', 1_000, 1_500],
      ['free_tier', 500, 500],
    ]);
    await expectConsistent(org);
  });

  it("within(tx) runs in the caller's transaction and rolls back with it", async () => {
    const org = await freshOrg();
    await expect(
      t.ctx.db.transaction(async (tx) => {
        await ledger.within(tx).hold(org, 100, 'job_rolled_back');
        await ledger.within(tx).credit(org, 50, { txType: 'topup' });
        expect(await ledger.within(tx).balance(org)).toMatchObject({ balance_cents: 550, held_cents: 100 });
        throw new Error('job insert failed');
      }),
    ).rejects.toThrow('job insert failed');
    expect(await ledger.balance(org)).toEqual({
      balance_cents: 500,
      held_cents: 0,
      available_cents: 500,
      debt_cents: 0,
      carry_micro: 0,
    });
    const kept = await t.ctx.db.transaction((tx) => ledger.within(tx).hold(org, 100, 'job_kept'));
    expect(await ledger.release(kept.holdId)).toEqual({ released_cents: 100 });
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStoreBefore, type StoreBefore } from '../../../test/store-before.js';
import type { Db } from '../../platform/db/index.js';

/** Migration 0195 (debts) applied over reversals written before it, whose owed cents stayed on the balance. */
describe('migration 0195_credit_debt over existing reversals', () => {
  let store: StoreBefore;
  let db: Db;
  beforeAll(async () => {
    store = await openStoreBefore(195);
    db = store.db;
  });
  afterAll(() => store.close());

  it("turns each reversal's owed cents (the earning less what it took) into debt, on the row and on the account", async () => {
    await db.exec(`
      INSERT INTO organizations (id, name) VALUES ('org_owes', 'owes'), ('org_square', 'square');
      INSERT INTO credit_accounts (org_id, balance_cents) VALUES ('org_owes', 0), ('org_square', 500);
      INSERT INTO credit_transactions (id, org_id, tx_type, amount_cents, amount_micro, balance_after, description, ref) VALUES
        ('tx_1', 'org_owes', 'earning', 850, 8500000, 850, 'job', 'job_a'),
        ('tx_2', 'org_owes', 'payout', -850, -8500000, 0, 'payout', 'po_1'),
        ('tx_3', 'org_owes', 'earning', 100, 1000000, 100, 'job', 'job_b'),
        ('tx_4', 'org_owes', 'earning_reversal', -100, -8500000, 0, 'proven false (750 cents owed)', 'job_a'),
        ('tx_5', 'org_square', 'earning', 8, 80000, 508, 'job', 'job_c'),
        ('tx_6', 'org_square', 'earning_reversal', -8, -80000, 500, 'proven false', 'job_c');
    `);
    expect(await store.migrateRest()).toContain(195);
    const { rows } = await db.query<{ id: string; debt_cents: number }>(
      'SELECT id, debt_cents FROM credit_transactions ORDER BY id',
    );
    expect(rows.map((r) => [r.id, r.debt_cents])).toEqual([
      ['tx_1', 0],
      ['tx_2', 0],
      ['tx_3', 0],
      ['tx_4', 750],
      ['tx_5', 0],
      ['tx_6', 0],
    ]);
    const accounts = await db.query<{ org_id: string; debt_cents: number }>(
      'SELECT org_id, debt_cents FROM credit_accounts ORDER BY org_id',
    );
    expect(accounts.rows).toEqual([
      { org_id: 'org_owes', debt_cents: 750 },
      { org_id: 'org_square', debt_cents: 0 },
    ]);
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStoreBefore, type StoreBefore } from '../../../test/store-before.js';
import type { Db } from '../../platform/db/index.js';

/** Migration 0030 (exact ledger amounts) applied over a store that holds rows written before it. */
describe('migration 0030_ledger_exact over existing rows', () => {
  let store: StoreBefore;
  let db: Db;
  beforeAll(async () => {
    store = await openStoreBefore(30);
    db = store.db;
  });
  afterAll(() => store.close());

  it('back-fills amount_micro = amount_cents * 10000, charged_micro on jobs, and the free tier left as promo_micro', async () => {
    await db.exec(`
      INSERT INTO organizations (id, name) VALUES ('org_old', 'old'), ('org_paid', 'paid');
      INSERT INTO credit_accounts (org_id, balance_cents, held_cents, carry_micro) VALUES ('org_old', 380, 0, 2500), ('org_paid', 1200, 0, 0);
      INSERT INTO credit_transactions (id, org_id, tx_type, amount_cents, balance_after, description, ref) VALUES
        ('tx_1', 'org_old', 'free_tier', 500, 500, 'grant', NULL),
        ('tx_2', 'org_old', 'charge', -120, 380, 'job', 'job_old'),
        ('tx_3', 'org_paid', 'free_tier', 500, 500, 'grant', NULL),
        ('tx_4', 'org_paid', 'topup', 1000, 1500, 'card', NULL),
        ('tx_5', 'org_paid', 'charge', -800, 700, 'job', NULL),
        ('tx_6', 'org_paid', 'earning', 500, 1200, 'earned', 'job_x');
    `);
    expect(await store.migrateRest()).toContain(30);
    const { rows } = await db.query<{ id: string; amount_micro: number; free_micro: number; hold_cents: number }>(
      'SELECT id, amount_micro, free_micro, hold_cents FROM credit_transactions ORDER BY id',
    );
    expect(rows).toEqual([
      { id: 'tx_1', amount_micro: 5_000_000, free_micro: 0, hold_cents: 0 },
      { id: 'tx_2', amount_micro: -1_200_000, free_micro: 0, hold_cents: 0 },
      { id: 'tx_3', amount_micro: 5_000_000, free_micro: 0, hold_cents: 0 },
      { id: 'tx_4', amount_micro: 10_000_000, free_micro: 0, hold_cents: 0 },
      { id: 'tx_5', amount_micro: -8_000_000, free_micro: 0, hold_cents: 0 },
      { id: 'tx_6', amount_micro: 5_000_000, free_micro: 0, hold_cents: 0 },
    ]);
    const accounts = await db.query<{ org_id: string; promo_micro: number }>(
      'SELECT org_id, promo_micro FROM credit_accounts ORDER BY org_id',
    );
    // org_old: 500 granted - 120 charged = 380 cents left, less the 2,500 µ carried; org_paid: its charges used the grant up.
    expect(accounts.rows).toEqual([
      { org_id: 'org_old', promo_micro: 3_797_500 },
      { org_id: 'org_paid', promo_micro: 0 },
    ]);
  });
});

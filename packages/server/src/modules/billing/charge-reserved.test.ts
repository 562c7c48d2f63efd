import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, signUp, type TestApp } from '../../../test/harness.js';
import { newId } from '../../platform/ids.js';
import { growReservation, reservationAmount } from './reservation-store.js';
import { createLedger, reconcileAccount, type Ledger, type ReservedCharging } from './service.js';
import { lockAccount } from './store.js';

/**
 * Charges without a hold (DESIGN.md section 7, revised 2026-11-27; billing/charge-reserved.ts):
 * a gateway request's charge is drawn from the reservation its instance set its maximum cost
 * aside in, then from the unreserved balance, and cut to what both hold, never below zero.
 */
describe('ledger.chargeReserved', () => {
  let t: TestApp;
  const instance = 'inst_charger';
  const drawnHere: [string, number][] = [];
  let ledger: Ledger;
  beforeAll(async () => {
    t = await createTestApp({ env: { SVC_FREE_TIER_CENTS: '0' } });
    // This instance's reservations hear what its charges drew (reservations.ts `drawn`).
    ledger = createLedger(t.ctx.db, { instanceId: instance, drawn: (org, cents) => drawnHere.push([org, cents]) });
  });
  afterAll(() => t.close());

  /** An organization with `cents` of paid credit and, per instance, a reservation of it. */
  async function org(cents: number, reservations: Record<string, number> = {}): Promise<string> {
    const orgId = (await signUp(t.app)).orgId;
    if (cents > 0) await ledger.credit(orgId, cents, { txType: 'topup' });
    for (const [instanceId, amount] of Object.entries(reservations))
      await t.ctx.db.transaction(async (tx) => {
        await lockAccount(tx, orgId);
        await growReservation(tx, { orgId, instanceId, cents: amount, ttlMs: 3_600_000 });
      });
    return orgId;
  }

  const charging = (orgId: string, over: Partial<ReservedCharging> = {}): ReservedCharging => ({
    orgId,
    instanceId: instance,
    usageMicro: 123_400, // 12 cents, 3,400 micro-CAD carried
    capCents: 50,
    options: { description: 'chat phi-4: 12 tokens', ref: newId('x') },
    ...over,
  });

  const account = async (orgId: string) =>
    (
      await t.ctx.db.query<{ balance_cents: number; held_cents: number; reserved_cents: number; carry_micro: number }>(
        'SELECT balance_cents, held_cents, reserved_cents, carry_micro FROM credit_accounts WHERE org_id = $1',
        [orgId],
      )
    ).rows[0];

  it("draws from its instance's reservation: one charge row, no hold, the reservation and the account lower by the cents drawn", async () => {
    const orgId = await org(1_000, { [instance]: 300, inst_other: 100 });
    drawnHere.length = 0;
    const [outcome] = await ledger.chargeReserved([charging(orgId)]);
    expect(outcome).toMatchObject({ charged_cents: 12, charged_micro: 123_400, drawn: 12, cut: false });
    expect(await account(orgId)).toEqual({
      balance_cents: 988,
      held_cents: 0,
      reserved_cents: 388,
      carry_micro: 3_400,
    });
    expect(await reservationAmount(t.ctx.db, orgId, instance)).toBe(288);
    expect(await reservationAmount(t.ctx.db, orgId, 'inst_other')).toBe(100);
    expect(drawnHere).toEqual([[orgId, 12]]);
    const rows = await t.ctx.db.query<{ tx_type: string; amount_cents: number; hold_cents: number }>(
      'SELECT tx_type, amount_cents, hold_cents FROM credit_transactions WHERE ref = $1',
      [outcome?.transaction.ref],
    );
    expect(rows.rows).toEqual([{ tx_type: 'charge', amount_cents: -12, hold_cents: 0 }]);
    expect((await reconcileAccount(t.ctx.db, orgId)).consistent).toBe(true);
  });

  it('draws what its reservation lacks from the unreserved balance; another instance draws on its own row, unheard here', async () => {
    const orgId = await org(100, { [instance]: 5, inst_other: 30 });
    drawnHere.length = 0;
    const [mine, theirs] = await ledger.chargeReserved([
      charging(orgId),
      charging(orgId, { instanceId: 'inst_other', usageMicro: 200_000 }),
    ]);
    expect(mine).toMatchObject({ charged_cents: 12, drawn: 5, cut: false });
    // 20 cents and the carry of 3,400 micro-CAD: 20 cents again carried 3,400.
    expect(theirs).toMatchObject({ charged_cents: 20, drawn: 20, cut: false });
    expect(await reservationAmount(t.ctx.db, orgId, 'inst_other')).toBe(10);
    expect(await account(orgId)).toMatchObject({ balance_cents: 68, reserved_cents: 10 });
    expect(drawnHere).toEqual([[orgId, 5]]);
    expect((await reconcileAccount(t.ctx.db, orgId)).consistent).toBe(true);
  });

  it('caps the charge at the maximum cost set aside, and credits the operator its earning', async () => {
    const orgId = await org(1_000, { [instance]: 100 });
    const operator = await org(0);
    const [outcome] = await ledger.chargeReserved([
      charging(orgId, {
        usageMicro: 9_000_000,
        capCents: 40,
        earn: { orgId: operator, options: { description: 'chat on node_1', ref: 'chatcmpl-x' } },
      }),
    ]);
    expect(outcome).toMatchObject({ charged_cents: 40, charged_micro: 400_000, drawn: 40, cut: false });
    expect(outcome?.earning).toMatchObject({ cents: 34, micro: 340_000 });
    expect(await account(orgId)).toMatchObject({ balance_cents: 960, carry_micro: 0, reserved_cents: 60 });
    expect(await account(operator)).toMatchObject({ balance_cents: 34 });
  });

  it("is cut to what is there when the reservation is gone and others' reservations hold the rest: never below zero, never into another instance's credit", async () => {
    // A dead instance's reservation was reclaimed and the balance spent meanwhile: 8 cents left,
    // 6 of them reserved by a live instance.
    const orgId = await org(8, { inst_live: 6 });
    const [outcome] = await ledger.chargeReserved([charging(orgId)]);
    expect(outcome).toMatchObject({ charged_cents: 2, charged_micro: 20_000, drawn: 0, cut: true });
    expect(outcome?.transaction.description).toContain('(cut to the credit left)');
    expect(await account(orgId)).toMatchObject({ balance_cents: 6, reserved_cents: 6, carry_micro: 0 });
    expect(await reservationAmount(t.ctx.db, orgId, 'inst_live')).toBe(6);
    expect((await reconcileAccount(t.ctx.db, orgId)).consistent).toBe(true);
  });

  it('many concurrent charges on one balance: the balance never goes below zero and no cent is charged twice', async () => {
    const orgId = await org(100, { [instance]: 40 });
    const outcomes = await Promise.all(
      Array.from({ length: 30 }, () => ledger.chargeReserved([charging(orgId, { usageMicro: 50_000 })])),
    );
    const charged = outcomes.reduce((sum, [o]) => sum + (o?.charged_cents ?? 0), 0);
    expect(charged).toBe(100);
    expect(outcomes.filter(([o]) => o?.cut)).toHaveLength(10);
    expect(await account(orgId)).toMatchObject({ balance_cents: 0, reserved_cents: 0 });
    expect(await reservationAmount(t.ctx.db, orgId, instance)).toBe(0);
    expect((await reconcileAccount(t.ctx.db, orgId)).consistent).toBe(true);
  });
});

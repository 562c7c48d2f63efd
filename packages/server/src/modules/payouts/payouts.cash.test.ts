import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signUp, TEST_STORE_KIND, type TestApp } from '../../../test/harness.js';
import { createPayoutTestApp, earnLikeTheProbe, onboardLocally } from '../../../test/payout-account.js';
import { cashCents } from '../billing/rules.js';
import { payableEarnings, reconcileAccount } from '../billing/service.js';
import { runPayouts, type PaymentDeps } from './service.js';

/**
 * Payouts pay paid credit only (issue 40, point 3). A payout was posted as a `charge`, which spends
 * promotional credit first: the sign-up grant and free-tier earnings left as money while the paid
 * credit stayed behind, to be spent on the operator's own node and paid out again.
 */
describe('a payout takes paid credit only', () => {
  let t: TestApp;
  let deps: PaymentDeps;
  beforeAll(async () => {
    ({ t, deps } = await createPayoutTestApp());
  });
  afterAll(() => t?.close());

  /** The probe's operator: the sign-up grant (500), 850 cents earned from free-tier work, 1,000 from paid work. */
  async function probeOperator(): Promise<string> {
    const op = await signUp(t.app);
    await onboardLocally(t.app, op);
    await earnLikeTheProbe(t.ctx.ledger, op.orgId);
    return op.orgId;
  }

  /** Spends `cents` on a job on the organization's own node: charged, then earned back less the fee, as a job's completion does. */
  async function spendOnOwnNode(orgId: string, cents: number): Promise<void> {
    const charged = await t.ctx.ledger.charge(orgId, cents * 10_000, { ref: 'job_own_node' });
    await t.ctx.ledger.earn(orgId, charged, { ref: 'job_own_node' });
  }

  const account = async (orgId: string) => {
    const { rows } = await t.ctx.db.query<{
      balance_cents: number;
      held_cents: number;
      carry_micro: number;
      promo_micro: number;
      reserved_cents: number;
    }>(
      'SELECT balance_cents, held_cents, carry_micro, promo_micro, reserved_cents FROM credit_accounts WHERE org_id = $1',
      [orgId],
    );
    const row = rows[0];
    if (!row) throw new Error(`no account for ${orgId}`);
    return row;
  };
  const paidOut = async (orgId: string) =>
    Number(
      (
        await t.ctx.db.query<{ cents: number }>(
          "SELECT COALESCE(sum(amount_cents), 0)::bigint AS cents FROM payouts WHERE org_id = $1 AND status <> 'failed'",
          [orgId],
        )
      ).rows[0]?.cents,
    );

  it('the probe: 2,350 cents of which 1,000 are paid credit; payouts pay 1,000 and the promotional 1,350 stay, however often it spends on its own node', async () => {
    const org = await probeOperator();
    expect(await account(org)).toMatchObject({ balance_cents: 2_350, promo_micro: 13_500_000 });
    expect((await payableEarnings(t.ctx.db, org)).payable_cents).toBe(1_000);

    const first = (await runPayouts(deps)).created.filter((p) => p.org_id === org);
    expect(first.map((p) => p.amount_cents)).toEqual([1_000]);
    // The payout took the paid part: the grant and the free-tier earnings are still promotional.
    expect(await account(org)).toMatchObject({ balance_cents: 1_350, promo_micro: 13_500_000 });
    const row = (
      await t.ctx.db.query<{ amount_cents: number; free_micro: number; balance_after: number }>(
        "SELECT amount_cents, free_micro, balance_after FROM credit_transactions WHERE org_id = $1 AND tx_type = 'payout'",
        [org],
      )
    ).rows;
    expect(row).toEqual([{ amount_cents: -1_000, free_micro: 0, balance_after: 1_350 }]);

    // Spending what is left on its own node earns only promotional credit: nothing more is paid out.
    for (let round = 0; round < 3; round++) {
      const { available_cents } = await t.ctx.ledger.balance(org);
      await spendOnOwnNode(org, available_cents);
      expect((await runPayouts(deps)).created.filter((p) => p.org_id === org)).toEqual([]);
    }
    expect(await paidOut(org)).toBe(1_000);
    expect(await payableEarnings(t.ctx.db, org)).toMatchObject({ payable_cents: 0, paid_out_cents: 1_000 });
    expect(await reconcileAccount(t.ctx.db, org)).toMatchObject({ consistent: true });
  });

  it(`concurrent payout runs and spending on its own node never pay more than the paid earnings (${TEST_STORE_KIND})`, async () => {
    const orgs = await Promise.all([probeOperator(), probeOperator(), probeOperator()]);
    for (let wave = 0; wave < 3; wave++) {
      const spends = orgs.flatMap((org) =>
        [300, 450].map((cents) =>
          spendOnOwnNode(org, cents).catch((err: { code?: string }) => {
            // A payout that committed first may leave too little: refused, nothing written.
            if (err.code !== 'insufficient_credits') throw err;
          }),
        ),
      );
      const runs = Array.from({ length: 6 }, () => runPayouts(deps));
      await Promise.all([...runs, ...spends]);
    }
    for (const org of orgs) {
      const paid = await paidOut(org);
      const left = await account(org);
      // Paid credit only ever came from the 1,000 cents of paid work (spending it on its own node
      // returns 85 %): what was paid out and what paid credit is left never exceed it.
      expect(paid).toBeGreaterThan(0);
      expect(paid + cashCents(left)).toBeLessThanOrEqual(1_000);
      expect(left.promo_micro).toBeLessThanOrEqual(left.balance_cents * 10_000);
      const audit = await reconcileAccount(t.ctx.db, org);
      expect(audit.consistent).toBe(true);
      expect(audit.balance_cents).toBe(audit.ledger_sum_cents);
      const payouts = await t.ctx.db.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM credit_transactions WHERE org_id = $1 AND tx_type = 'payout' AND free_micro <> 0",
        [org],
      );
      expect(payouts.rows[0]?.n).toBe(0);
    }
  }, 60_000);
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, createTestStore, signUp, TEST_STORE_KIND, type TestStore } from '@svc/server/testing';
import { earnLikeTheProbe, onboardLocally, PAYOUT_TEST_ENV, payLocalTopup } from '../../server/test/payout-account.js';
import { spawnSvc } from './spawn.js';

/**
 * `svc topups confirm` as a real process (issue 40, point 4), and payout runs of two processes at
 * once (point 3). With the `local` provider a buyer's own checkout adds promotional credit; the
 * administrator's confirmation turns it into paid credit, once.
 */
describe('svc topups confirm and svc payouts run as real processes', () => {
  let store: TestStore;
  let orgId = '';
  let topupId = '';
  const appEnv = PAYOUT_TEST_ENV;
  const env = () => ({ ...appEnv, SVC_DATA_DIR: store.dataDir, DATABASE_URL: store.databaseUrl ?? '' });

  beforeAll(async () => {
    store = await createTestStore();
    const t = await createTestApp({ store, env: appEnv });
    try {
      const owner = await signUp(t.app);
      orgId = owner.orgId;
      await onboardLocally(t.app, owner);
      topupId = await payLocalTopup(t.app, owner, 1_000);
    } finally {
      await t.close();
    }
  });
  afterAll(() => store.drop());

  /** Spends the whole balance on the organization's own node (charged, then earned back less the fee). */
  async function spendAllOnOwnNode(org: string): Promise<void> {
    const t = await createTestApp({ store, env: appEnv });
    try {
      const { available_cents } = await t.ctx.ledger.balance(org);
      const charged = await t.ctx.ledger.charge(org, available_cents * 10_000, { ref: 'job_own_node' });
      await t.ctx.ledger.earn(org, charged, { ref: 'job_own_node' });
    } finally {
      await t.close();
    }
  }

  it('confirms a self-paid local top-up once; spent on its own node, the payout run then pays 85 % of it', async () => {
    const help = spawnSvc(['help'], env());
    expect(await help.exited).toBe(0);
    expect(help.stdout()).toContain('svc topups confirm TOPUP_ID [--data-dir DIR]');

    const confirm = spawnSvc(['topups', 'confirm', topupId], env());
    expect(await confirm.exited, confirm.stderr()).toBe(0);
    const [json = '{}', line] = confirm.stdout().split('\n');
    expect(JSON.parse(json)).toMatchObject({ topup_id: topupId, status: 'paid', confirmed_at: expect.any(String) });
    expect(line).toMatch(
      new RegExp(
        `^svc topups: confirmed ${topupId}: 10\\.00 CAD of ${orgId}'s credit is now paid credit \\(transaction tx_`,
      ),
    );

    const again = spawnSvc(['topups', 'confirm', topupId], env());
    expect(await again.exited).toBe(1);
    expect(again.stderr()).toMatch(new RegExp(`svc topups: top-up ${topupId} is already confirmed`));
    const unknown = spawnSvc(['topups', 'confirm', 'topup_nope'], env());
    expect(await unknown.exited).toBe(1);
    expect(unknown.stderr()).toContain('svc topups: top-up topup_nope not found in this store');
    const bad = spawnSvc(['topups', 'approve', topupId], env());
    expect(await bad.exited).toBe(2);
    expect(bad.stderr()).toContain("expected 'confirm'");

    // The grant (500, promotional) is spent first, then the confirmed 1,000: 85 % of those are payable.
    await spendAllOnOwnNode(orgId);
    const run = spawnSvc(['payouts', 'run'], env());
    expect(await run.exited, run.stderr()).toBe(0);
    expect(JSON.parse(run.stdout().split('\n')[0] ?? '{}')).toMatchObject({ status: 'pending', amount_cents: 850 });
  }, 120_000);

  it.runIf(TEST_STORE_KIND === 'postgres')(
    'two payout runs in two processes at once pay the paid earnings once, and never the promotional credit',
    async () => {
      const t = await createTestApp({ store, env: appEnv });
      let operator = '';
      try {
        const op = await signUp(t.app);
        operator = op.orgId;
        await onboardLocally(t.app, op);
        await earnLikeTheProbe(t.ctx.ledger, operator);
      } finally {
        await t.close();
      }
      const runs = [spawnSvc(['payouts', 'run'], env()), spawnSvc(['payouts', 'run'], env())];
      for (const run of runs) expect(await run.exited, run.stderr()).toBe(0);
      const paid = runs
        .flatMap((run) => run.stdout().split('\n'))
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as { amount_cents: number; id: string });
      const after = await createTestApp({ store, env: appEnv });
      try {
        const { rows } = await after.ctx.db.query<{ amount_cents: number }>(
          'SELECT amount_cents FROM payouts WHERE org_id = $1',
          [operator],
        );
        expect(rows.map((r) => Number(r.amount_cents))).toEqual([1_000]);
        expect(paid.filter((p) => p.amount_cents === 1_000)).toHaveLength(1);
        // The 1,350 cents left are the promotional grant and free-tier earnings, still promotional.
        const account = await after.ctx.db.query<{ balance_cents: number; promo_micro: number }>(
          'SELECT balance_cents, promo_micro FROM credit_accounts WHERE org_id = $1',
          [operator],
        );
        expect(account.rows.map((r) => [Number(r.balance_cents), Number(r.promo_micro)])).toEqual([
          [1_350, 13_500_000],
        ]);
      } finally {
        await after.close();
      }
    },
    120_000,
  );
});

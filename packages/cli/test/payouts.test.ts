import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createTestApp, createTestStore, signUp, type TestBuyer, type TestStore } from '@svc/server/testing';
import { spawnSvc } from './spawn.js';

// npm test: one store: the subject is the two commands as processes (output, exit codes); a payout run and marking it
// paid run on both stores in packages/server/src/modules/payouts/payouts.local.test.ts.

/** `svc payouts run` and `svc payouts mark-paid` as real processes, with the local provider. */
describe('svc payouts as a real process', () => {
  let store: TestStore;
  let owner: TestBuyer;
  let operatorKey = '';
  beforeAll(async () => {
    store = await createTestStore();
    const t = await createTestApp({ store, env: { SVC_PAYOUT_INTERVAL: 'off' } });
    try {
      owner = await signUp(t.app);
      operatorKey = (
        await t.app.inject({
          method: 'POST',
          url: '/api/v1/auth/api-keys',
          headers: bearer(owner.token),
          payload: { label: 'node', scopes: ['operator'] },
        })
      ).json().api_key;
      const accountId = (
        await t.app.inject({
          method: 'POST',
          url: '/api/v1/node/connect',
          headers: bearer(operatorKey),
          payload: { email: owner.email, country: 'CA' },
        })
      ).json().account_id;
      const { url } = (
        await t.app.inject({
          method: 'POST',
          url: '/api/v1/node/connect/onboarding',
          headers: bearer(operatorKey),
          payload: { account_id: accountId },
        })
      ).json();
      const u = new URL(url as string);
      await t.app.inject({
        method: 'POST',
        url: `${u.pathname}${u.search}`,
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: 'action=complete',
      });
      await t.ctx.ledger.credit(owner.orgId, 1_500, { txType: 'earning', description: 'earnings', ref: 'job_cli' });
    } finally {
      await t.close();
    }
  });
  afterAll(() => store.drop());
  const env = () => ({ SVC_DATA_DIR: store.dataDir, DATABASE_URL: store.databaseUrl ?? '' });

  it('runs a payout, then records it paid by hand; bad usage is exit 2, a second mark-paid exit 1', async () => {
    const run = spawnSvc(['payouts', 'run'], env());
    expect(await run.exited, run.stderr()).toBe(0);
    expect(run.stdout()).toMatch(
      /svc payouts: 1 created, 0 re-sent, 0 below the minimum \(1000 cents\), provider local/,
    );
    const payout = JSON.parse(run.stdout().split('\n')[0] ?? '{}') as {
      id: string;
      status: string;
      amount_cents: number;
    };
    expect(payout).toMatchObject({ status: 'pending', amount_cents: 1_500 });

    const again = spawnSvc(['payouts', 'run'], env());
    expect(await again.exited).toBe(0);
    expect(again.stdout()).toContain('0 created');

    const mark = spawnSvc(['payouts', 'mark-paid', payout.id, '--ref', 'wire-7'], env());
    expect(await mark.exited, mark.stderr()).toBe(0);
    expect(JSON.parse(mark.stdout())).toMatchObject({ id: payout.id, status: 'paid', provider_ref: 'wire-7' });
    const twice = spawnSvc(['payouts', 'mark-paid', payout.id], env());
    expect(await twice.exited).toBe(1);
    expect(twice.stderr()).toContain('is not pending');
    const bad = spawnSvc(['payouts', 'pay-everyone'], env());
    expect(await bad.exited).toBe(2);
    expect(bad.stderr()).toContain("expected 'run' or 'mark-paid'");

    const t = await createTestApp({ store, env: { SVC_PAYOUT_INTERVAL: 'off' } });
    try {
      const list = (await t.app.inject({ method: 'GET', url: '/api/v1/payouts', headers: bearer(operatorKey) })).json();
      expect(list).toMatchObject({ total: 1, payable_cents: 0, provider: 'local', moves_real_money: false });
      expect(list.payouts[0]).toMatchObject({ id: payout.id, status: 'paid', provider_ref: 'wire-7' });
    } finally {
      await t.close();
    }
  }, 120_000);
});

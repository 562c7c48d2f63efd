import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  bearer,
  createTestApp,
  createTestStore,
  signUp,
  TEST_STORE_KIND,
  type TestBuyer,
  type TestStore,
} from '@svc/server/testing';
import { spawnSvc } from './spawn.js';

describe('svc credits add as a real process', () => {
  let store: TestStore;
  let buyer: TestBuyer;
  beforeAll(async () => {
    store = await createTestStore();
    // The organization must exist first: sign up in-process, then close, since PGlite allows one process.
    const t = await createTestApp({ store });
    buyer = await signUp(t.app);
    await t.close();
  });
  afterAll(() => store.drop());
  const env = () => ({ SVC_DATA_DIR: store.dataDir, DATABASE_URL: store.databaseUrl ?? '' });
  const balanceOf = async (who: TestBuyer) => {
    const t = await createTestApp({ store });
    try {
      const balance = (
        await t.app.inject({ method: 'GET', url: '/api/v1/billing/balance', headers: bearer(who.apiKey) })
      ).json();
      const ledger = (
        await t.app.inject({ method: 'GET', url: '/api/v1/billing/transactions', headers: bearer(who.apiKey) })
      ).json();
      return { balance, ledger };
    } finally {
      await t.close();
    }
  };

  it('adds a topup row and prints the new balance', async () => {
    const p = spawnSvc(
      ['credits', 'add', '--org', buyer.orgId, '--cents', '1250', '--description', 'Wire transfer, ref "A-1"'],
      env(),
    );
    expect(await p.exited, p.stderr()).toBe(0);
    expect(p.stdout()).toContain(`added 1250 cents (12.50 CAD) to ${buyer.orgId}`);
    expect(p.stdout()).toContain('balance 1750 cents (17.50 CAD), held 0, available 1750');
    const { balance, ledger } = await balanceOf(buyer);
    expect(balance).toMatchObject({ balance_cents: 1_750, available_cents: 1_750, free_tier_granted_cents: 500 });
    expect(ledger.transactions[0]).toMatchObject({
      tx_type: 'topup',
      amount_cents: 1_250,
      balance_after: 1_750,
      description: 'Wire transfer, ref "A-1"',
    });
  });

  it('refuses an unknown organization clearly, exit code 1', async () => {
    const p = spawnSvc(['credits', 'add', '--org', 'org_doesnotexist', '--cents', '5'], env());
    expect(await p.exited).toBe(1);
    expect(p.stderr()).toContain("svc credits: no organization 'org_doesnotexist' in this store");
  });

  it('refuses bad usage with exit code 2', async () => {
    const cases: [string[], string][] = [
      [
        ['credits', 'add', '--org', buyer.orgId, '--cents', '0'],
        "--cents must be a positive whole number of cents, got '0'",
      ],
      [['credits', 'add', '--org', buyer.orgId, '--cents', '12.5'], '--cents must be a positive whole number'],
      [['credits', 'add', '--org', buyer.orgId, '--cents', '-3'], '--cents must be a positive whole number'],
      [['credits', 'add', '--cents', '5'], '--org ORG_ID is required'],
      [['credits', 'remove', '--org', buyer.orgId, '--cents', '5'], "expected 'add'"],
      [['credits', 'add', '--org', buyer.orgId, '--cents', '5', '--currency', 'USD'], 'unknown option --currency'],
    ];
    const runs = cases.map(([args]) => spawnSvc(args, env()));
    const codes = await Promise.all(runs.map((p) => p.exited));
    expect(codes).toEqual(cases.map(() => 2));
    cases.forEach(([, message], i) => expect(runs[i]?.stderr()).toContain(message));
    const { balance } = await balanceOf(buyer);
    expect(balance.balance_cents).toBe(1_750);
  });

  it.runIf(TEST_STORE_KIND === 'pglite')(
    'refuses an embedded store another process has open, or a data dir with no store',
    async () => {
      const t = await createTestApp({ store });
      try {
        const p = spawnSvc(['credits', 'add', '--org', buyer.orgId, '--cents', '5'], env());
        expect(await p.exited).toBe(1);
        expect(p.stderr()).toContain('is open in another process');
        expect(p.stderr()).toContain('Stop `svc serve` first');
      } finally {
        await t.close();
      }
      const empty = spawnSvc(
        ['credits', 'add', '--org', buyer.orgId, '--cents', '5', '--data-dir', `${store.dataDir}/nowhere`],
        env(),
      );
      expect(await empty.exited).toBe(1);
      expect(empty.stderr()).toContain('no embedded store in');
      expect((await balanceOf(buyer)).balance.balance_cents).toBe(1_750);
    },
  );

  it.runIf(TEST_STORE_KIND === 'postgres')('works against PostgreSQL while the server runs', async () => {
    const t = await createTestApp({ store });
    try {
      const p = spawnSvc(['credits', 'add', '--org', buyer.orgId, '--cents', '250'], env());
      expect(await p.exited, p.stderr()).toBe(0);
      const res = await t.app.inject({ method: 'GET', url: '/api/v1/billing/balance', headers: bearer(buyer.apiKey) });
      expect(res.json()).toMatchObject({ balance_cents: 2_000 });
    } finally {
      await t.close();
    }
  });
});

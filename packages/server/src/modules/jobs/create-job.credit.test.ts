import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { bearer, createTestApp, signUp, type TestApp, type TestBuyer } from '../../../test/harness.js';
import { createReservations, type Reservations } from '../billing/reservations.js';
import { sumReservations } from '../billing/reservation-store.js';
import { reconcileAccount } from '../billing/service.js';
import { readAccount } from '../billing/store.js';
import { submitRepositoryJob, withRepositoryJobCredit } from './service.js';

/**
 * Job submissions take their holds from the instance's credit reservation (DESIGN.md section 4,
 * issue 22 point 2), as gateway requests do: the 402 is decided in memory against the
 * reservation, and the hold draws the budget from it.
 */
describe('job submissions: the budget taken from the credit reservation', () => {
  let t: TestApp;
  const others: Reservations[] = [];
  beforeAll(async () => {
    // 100 cents of credit per organization, reserved in slices of 60.
    t = await createTestApp({ env: { SVC_FREE_TIER_CENTS: '100', SVC_RESERVATION_SLICE_CENTS: '60' } });
  });
  afterAll(async () => {
    for (const r of others) await r.close();
    await t.close();
  });

  const submit = (buyer: TestBuyer, cents: number) =>
    t.app.inject({
      method: 'POST',
      url: '/api/v1/marketplace/jobs',
      headers: bearer(buyer.apiKey),
      payload: {
        kind: 1,
        budget: cents / 100,
        max_price_per_unit: 0.00001,
        currency: 'CAD',
        inline_text: 'hi',
        strict_jurisdiction: 'AQ',
      },
    });
  const account = async (orgId: string) => {
    const row = await readAccount(t.ctx.db, orgId);
    return { held: row?.held_cents, reserved: row?.reserved_cents, rows: await sumReservations(t.ctx.db, orgId) };
  };

  it("draws the hold from this instance's reservation, and counts it in memory", async () => {
    const buyer = await signUp(t.app);
    const res = await submit(buyer, 25);
    expect(res.statusCode, res.body).toBe(201);
    // The take reserved a slice of 60; the hold drew its 25 out of it.
    expect(await account(buyer.orgId)).toEqual({ held: 25, reserved: 35, rows: 35 });
    expect(t.ctx.reservations.unused(buyer.orgId)).toBe(35);
    expect((await reconcileAccount(t.ctx.db, buyer.orgId)).consistent).toBe(true);
  });

  it('locks the account row last in its transaction: only the hold and the commit wait on it', async () => {
    const buyer = await signUp(t.app);
    // Every transaction's statements, transaction by transaction.
    const transactions: string[][] = [];
    const transaction = t.ctx.db.transaction.bind(t.ctx.db);
    vi.spyOn(t.ctx.db, 'transaction').mockImplementation((fn) => {
      const statements: string[] = [];
      transactions.push(statements);
      return transaction((tx) =>
        fn({
          query: (sql, params) => {
            statements.push(sql);
            return tx.query(sql, params);
          },
          exec: (sql) => tx.exec(sql),
        }),
      );
    });
    try {
      const res = await submit(buyer, 20);
      expect(res.statusCode, res.body).toBe(201);
    } finally {
      vi.restoreAllMocks();
    }
    const submission = transactions.find((sql) => sql.some((q) => q.includes('INSERT INTO jobs')));
    expect(submission).toBeDefined();
    const statements = submission ?? [];
    const lock = statements.findIndex((q) => /FROM credit_accounts[\s\S]*FOR UPDATE/.test(q));
    expect(lock).toBeGreaterThan(statements.findIndex((q) => q.includes('INSERT INTO jobs')));
    // After the lock: the reservation's amount and the hold's one statement, nothing of the job.
    expect(statements.slice(lock + 1)).toHaveLength(2);
    expect(statements.slice(lock + 1).join('\n')).toContain('INSERT INTO credit_holds');
    expect(await account(buyer.orgId)).toMatchObject({ held: 20 });
  });

  it('a job cannot take the cents a gateway request in flight counted on: 402 for the job, the request keeps them', async () => {
    const buyer = await signUp(t.app);
    // A gateway request between its 402 decision and its hold: 70 cents of the organization's 100.
    const inFlight = await t.ctx.reservations.take(buyer.orgId, 70);
    const tooMuch = await submit(buyer, 50);
    expect(tooMuch.statusCode, tooMuch.body).toBe(402);
    expect(tooMuch.json()).toMatchObject({ error: 'insufficient_credits' });
    expect(tooMuch.json().message).toContain('30 cents available, 50 cents needed');
    const fits = await submit(buyer, 30);
    expect(fits.statusCode, fits.body).toBe(201);
    // The request's hold still finds its 70 cents in the reservation.
    const { holdId } = await t.ctx.ledger.hold(buyer.orgId, 70, 'req_in_flight');
    inFlight.release();
    expect(holdId).toMatch(/^hold_/);
    expect(await account(buyer.orgId)).toEqual({ held: 100, reserved: 0, rows: 0 });
    expect((await reconcileAccount(t.ctx.db, buyer.orgId)).consistent).toBe(true);
  });

  it('a repository-work job (work orders, preflights) takes its budget from the reservation too', async () => {
    const buyer = await signUp(t.app);
    await t.ctx.ledger.credit(buyer.orgId, 200, { txType: 'topup', ref: 'test' }); // 300 cents
    const owner = { orgId: buyer.orgId, buyerId: buyer.buyerId };
    const input = { payload: {}, strict_jurisdiction: 'AQ', requires_tee: false, timeout_seconds: 60 };
    let opened = 0;
    const queue = () =>
      withRepositoryJobCredit(t.ctx, buyer.orgId, () => {
        opened++;
        return t.ctx.db.transaction((tx) => submitRepositoryJob(t.ctx, tx, owner, input));
      });
    // A gateway request in flight counts on 150 cents: the job's 200 are not there.
    const inFlight = await t.ctx.reservations.take(buyer.orgId, 150);
    const refused = await queue().catch((err: unknown) => err);
    expect(refused).toMatchObject({
      code: 'insufficient_credits',
      message: expect.stringContaining('150 cents available, 200 cents needed'),
    });
    expect(opened).toBe(0);
    inFlight.release();
    const job = await queue();
    expect(job).toMatchObject({ kind: 9, budget_cents: 200 });
    expect(await account(buyer.orgId)).toMatchObject({ held: 200 });
    expect((await reconcileAccount(t.ctx.db, buyer.orgId)).consistent).toBe(true);
  });

  it('two instances cannot overdraw with jobs: what another instance reserved is not there to hold', async () => {
    const buyer = await signUp(t.app);
    const other = createReservations({
      db: t.ctx.db,
      instanceId: 'inst_other_jobs',
      ttlMs: 30_000,
      sliceCents: 60,
      renewEveryMs: 0,
    });
    others.push(other);
    const held = await other.take(buyer.orgId, 10); // the other instance reserves 60 of 100
    const results = await Promise.all([15, 15, 15, 15].map((cents) => submit(buyer, cents)));
    // 40 cents are left to this instance: two jobs of 15 fit, the other two are refused.
    expect(results.map((r) => r.statusCode).sort()).toEqual([201, 201, 402, 402]);
    const after = await readAccount(t.ctx.db, buyer.orgId);
    expect(after?.balance_cents).toBe(100);
    expect((after?.held_cents ?? 0) + (after?.reserved_cents ?? 0)).toBeLessThanOrEqual(100);
    expect(await sumReservations(t.ctx.db, buyer.orgId)).toBe(after?.reserved_cents);
    held.release();
    await other.close();
    expect(await account(buyer.orgId)).toMatchObject({ held: 30 });
    expect((await reconcileAccount(t.ctx.db, buyer.orgId)).consistent).toBe(true);
  });
});

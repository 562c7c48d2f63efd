import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createTestApp, signUp, type TestApp } from '../../../test/harness.js';
import { eventually } from '../../../test/waits.js';
import { ApiError } from '../../platform/errors.js';
import { createReservations, type Reservations } from './reservations.js';
import { sumReservations } from './reservation-store.js';
import { createLedger, reconcileAccount } from './service.js';
import { readAccount } from './store.js';

function code(err: unknown): string {
  return err instanceof ApiError ? err.code : String(err);
}

describe('credit reservations: the 402 decided in memory, the store never overdrawn', () => {
  let t: TestApp;
  const open: Reservations[] = [];
  beforeAll(async () => {
    t = await createTestApp({ env: { SVC_FREE_TIER_CENTS: '100' } });
  });
  afterAll(async () => {
    for (const r of open) await r.close();
    await t.close();
  });

  function instance(instanceId: string, o: { ttlMs?: number; sliceCents?: number } = {}): Reservations {
    const r = createReservations({
      db: t.ctx.db,
      instanceId,
      ttlMs: o.ttlMs ?? 30_000,
      sliceCents: o.sliceCents ?? 60,
      renewEveryMs: 0,
    });
    open.push(r);
    return r;
  }

  async function reserved(orgId: string) {
    const account = await readAccount(t.ctx.db, orgId);
    return { account: account?.reserved_cents, rows: await sumReservations(t.ctx.db, orgId) };
  }

  it('takes a slice of the balance once, then decides further takes without a statement', async () => {
    const { orgId } = await signUp(t.app);
    const a = instance('inst_a1');
    const ticket = await a.take(orgId, 10);
    expect(a.unused(orgId)).toBe(50);
    expect(await reserved(orgId)).toEqual({ account: 60, rows: 60 });
    const query = vi.spyOn(t.ctx.db, 'query');
    const transaction = vi.spyOn(t.ctx.db, 'transaction');
    const more = await Promise.all([a.take(orgId, 20), a.take(orgId, 30)]);
    expect([query.mock.calls.length, transaction.mock.calls.length]).toEqual([0, 0]);
    expect(a.unused(orgId)).toBe(0);
    vi.restoreAllMocks();
    for (const m of [ticket, ...more]) m.release();
    expect(a.unused(orgId)).toBe(60);
  });

  it('two instances: the sum of reservations never exceeds the balance; a take neither can cover is 402', async () => {
    const { orgId } = await signUp(t.app);
    const a = instance('inst_a2');
    const b = instance('inst_b2');
    await a.take(orgId, 10); // a reserves 60 of 100
    const refused = await b.take(orgId, 50).catch((e: unknown) => e);
    expect(code(refused)).toBe('insufficient_credits');
    expect((refused as Error).message).toContain('40 cents available, 50 cents needed');
    await b.take(orgId, 40); // all that is left
    expect(await reserved(orgId)).toEqual({ account: 100, rows: 100 });
    expect(code(await a.take(orgId, 51).catch((e: unknown) => e))).toBe('insufficient_credits');
    expect((await reconcileAccount(t.ctx.db, orgId)).consistent).toBe(true);
    // Returned on shutdown: the balance is available again, to the other instance too.
    await a.close();
    expect(await reserved(orgId)).toEqual({ account: 40, rows: 40 });
    await b.take(orgId, 60);
    expect(await reserved(orgId)).toEqual({ account: 100, rows: 100 });
  });

  it("a hold draws from this instance's reservation first, and the count in memory follows", async () => {
    const { orgId } = await signUp(t.app);
    const a = instance('inst_a3');
    const ledger = createLedger(t.ctx.db, a);
    const ticket = await a.take(orgId, 25);
    await ledger.hold(orgId, 25, 'req_x');
    ticket.release();
    expect(a.unused(orgId)).toBe(35);
    expect(await reserved(orgId)).toEqual({ account: 35, rows: 35 });
    // A hold larger than the reservation takes the rest from the unreserved balance (40 left).
    await ledger.hold(orgId, 70, 'job_y');
    expect(a.unused(orgId)).toBe(0);
    const account = await readAccount(t.ctx.db, orgId);
    expect([account?.held_cents, account?.reserved_cents, account?.balance_cents]).toEqual([95, 0, 100]);
    expect(code(await ledger.hold(orgId, 6, 'job_z').catch((e: unknown) => e))).toBe('insufficient_credits');
    expect((await reconcileAccount(t.ctx.db, orgId)).consistent).toBe(true);
  });

  it('an instance that stops renewing loses its reservation to the others once it expires', async () => {
    const { orgId } = await signUp(t.app);
    const stalled = instance('inst_s4', { ttlMs: 1_000, sliceCents: 100 });
    await stalled.take(orgId, 1);
    const other = instance('inst_o4');
    expect(code(await other.take(orgId, 50).catch((e: unknown) => e))).toBe('insufficient_credits');
    // Once it has expired (a condition, not a fixed wait), its own memory no longer trusts it
    // and the other instance may take the whole balance.
    await eventually(() => stalled.unused(orgId) === 0, 10_000);
    await eventually(
      () =>
        other.take(orgId, 100).then(
          () => true,
          () => false,
        ),
      10_000,
    );
    expect(await reserved(orgId)).toEqual({ account: 100, rows: 100 });
    expect((await reconcileAccount(t.ctx.db, orgId)).consistent).toBe(true);
  });

  it('renewal keeps a busy reservation and returns an idle one', async () => {
    const { orgId } = await signUp(t.app);
    const a = instance('inst_a5');
    const ticket = await a.take(orgId, 5);
    await a.renew(); // in use: kept
    expect(await reserved(orgId)).toEqual({ account: 60, rows: 60 });
    ticket.release();
    (await a.take(orgId, 5)).release();
    await a.renew(); // taken from since the last renewal: kept
    expect(await reserved(orgId)).toEqual({ account: 60, rows: 60 });
    await a.renew(); // idle: returned
    expect(await reserved(orgId)).toEqual({ account: 0, rows: 0 });
    expect(a.unused(orgId)).toBe(0);
  });
});

import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createTestApp, signUp, type TestApp } from '../../../test/harness.js';
import { eventually } from '../../../test/waits.js';
import type { Db } from '../../platform/db/index.js';
import { ApiError } from '../../platform/errors.js';
import { createMetrics, type Metrics } from '../../platform/metrics.js';
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

  function instance(
    instanceId: string,
    o: { ttlMs?: number; sliceCents?: number; shared?: boolean; askWaitMs?: number; metrics?: Metrics; db?: Db } = {},
  ): Reservations {
    const r = createReservations({
      db: o.db ?? t.ctx.db,
      instanceId,
      ttlMs: o.ttlMs ?? 30_000,
      sliceCents: o.sliceCents ?? 60,
      renewEveryMs: 0,
      // Instances sharing the store hear each other's give-back requests on its bus.
      ...(o.shared ? { bus: t.ctx.bus, askWaitMs: o.askWaitMs ?? 5_000, metrics: o.metrics } : {}),
    });
    open.push(r);
    return r;
  }

  /** Two instances on one store and bus (the org's balance, 100 cents, below one slice of 500). */
  async function sharedPair(tag: string, o: { askWaitMs?: number } = {}) {
    const m = { a: createMetrics(), b: createMetrics() };
    const a = instance(`inst_a${tag}`, { sliceCents: 500, shared: true, metrics: m.a, ...o });
    const b = instance(`inst_b${tag}`, { sliceCents: 500, shared: true, metrics: m.b, ...o });
    await Promise.all([a.ready, b.ready]);
    return { a, b, m };
  }

  async function giveBacks(m: Metrics) {
    const { values } = await m.creditGiveBacks.get();
    const of = (role: string) => values.find((v) => v.labels.role === role)?.value ?? 0;
    return { sent: of('sent'), served: of('served') };
  }

  /** The sum of reservations is the account's figure and, with the holds, within the balance. */
  async function withinBalance(orgId: string) {
    const account = await readAccount(t.ctx.db, orgId);
    const rows = await sumReservations(t.ctx.db, orgId);
    expect(rows).toBe(account?.reserved_cents);
    expect((account?.held_cents ?? 0) + rows).toBeLessThanOrEqual(account?.balance_cents ?? 0);
    expect((await reconcileAccount(t.ctx.db, orgId)).consistent).toBe(true);
    return rows;
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

  it("a gateway charge written by another instance draws on this instance's row; resync brings memory down to it before the credit goes back", async () => {
    const { orgId } = await signUp(t.app);
    const a = instance('inst_a_resync');
    // A request served by a takes its maximum cost (no hold: DESIGN.md section 7) ...
    const ticket = await a.take(orgId, 10);
    expect(a.unused(orgId)).toBe(50);
    // ... and its node's receipt reaches another instance, whose ledger charges it 7 cents drawn
    // from a's row (the request row names a as the instance holding its credit).
    const [outcome] = await createLedger(t.ctx.db).chargeReserved([
      { orgId, instanceId: 'inst_a_resync', usageMicro: 70_000, capCents: 10, options: { ref: 'chatcmpl-resync' } },
    ]);
    expect(outcome).toMatchObject({ charged_cents: 7, drawn: 7 });
    expect(await reserved(orgId)).toEqual({ account: 53, rows: 53 });
    // Memory still believes in 60: without resync, releasing the ticket would offer 60 cents
    // where the row holds 53.
    await a.resync(orgId);
    ticket.release();
    expect(a.unused(orgId)).toBe(53);
    expect(await withinBalance(orgId)).toBe(53);
  });

  it('a take that came up short because a request still held its credit takes it once that credit comes back during the refill', async () => {
    // 3 cents, all in this instance's reservation; a gateway request holds 2 of them until its
    // charge commits, which happens while the next request's refill asks the store.
    const { orgId } = await signUp(t.app);
    await createLedger(t.ctx.db).charge(orgId, 970_000, { ref: 'spent' }); // 100 cents of free tier, 3 left
    const a = instance('inst_a_released', { sliceCents: 500 });
    const first = await a.take(orgId, 2);
    expect(a.unused(orgId)).toBe(1);
    const transaction = t.ctx.db.transaction.bind(t.ctx.db);
    vi.spyOn(t.ctx.db, 'transaction').mockImplementation((fn) => {
      first.release();
      return transaction(fn);
    });
    const second = await a.take(orgId, 2);
    vi.restoreAllMocks();
    expect(a.unused(orgId)).toBe(1);
    second.release();
    expect(await withinBalance(orgId)).toBe(3);
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

  it('a balance below one slice reserved whole by one instance: another asks it to give back its unused part, and takes it at once', async () => {
    const { orgId } = await signUp(t.app);
    const { a, b, m } = await sharedPair('6');
    const kept = await a.take(orgId, 10); // a reserves all 100 (below a slice) and keeps 10 taken
    expect(await reserved(orgId)).toEqual({ account: 100, rows: 100 });
    // No renewal runs (renewEveryMs 0) and the wait bound is 5 s: the answer ends the wait.
    const started = Date.now();
    const ticket = await b.take(orgId, 50);
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(await giveBacks(m.b)).toEqual({ sent: 1, served: 0 });
    expect(await giveBacks(m.a)).toEqual({ sent: 0, served: 1 });
    // a gave back 90 (never the 10 taken); b reserved what it needed, half the 90 being less.
    expect(a.unused(orgId)).toBe(0);
    expect(b.unused(orgId)).toBe(0);
    const { rows } = await t.ctx.db.query<{ instance_id: string; amount_cents: number }>(
      'SELECT instance_id, amount_cents FROM credit_reservations WHERE org_id = $1 ORDER BY instance_id',
      [orgId],
    );
    expect(rows.map((r) => [r.instance_id, Number(r.amount_cents)])).toEqual([
      ['inst_a6', 10],
      ['inst_b6', 50],
    ]);
    expect(await withinBalance(orgId)).toBe(60);
    // a takes the free 40 itself; then nothing is unused anywhere: b's answer (0) ends a's ask at once.
    const more = await a.take(orgId, 40);
    const refused = await a.take(orgId, 1).catch((e: unknown) => e);
    expect(code(refused)).toBe('insufficient_credits');
    expect((refused as Error).message).toContain('0 cents available, 1 cents needed');
    expect(await giveBacks(m.a)).toEqual({ sent: 1, served: 1 });
    expect(await withinBalance(orgId)).toBe(100);
    for (const x of [kept, ticket, more]) x.release();
  });

  it('a take short with no other holder is refused without asking; a holder that never answers is waited for once', async () => {
    const { orgId } = await signUp(t.app);
    const { b, m } = await sharedPair('7', { askWaitMs: 150 });
    expect(code(await b.take(orgId, 101).catch((e: unknown) => e))).toBe('insufficient_credits');
    expect(await giveBacks(m.b)).toEqual({ sent: 0, served: 0 });
    // An instance off the bus (killed: its row lives until it expires) reserves the whole balance.
    const deaf = instance('inst_d7', { sliceCents: 500 });
    await deaf.take(orgId, 1);
    const started = Date.now();
    expect(code(await b.take(orgId, 50).catch((e: unknown) => e))).toBe('insufficient_credits');
    expect(Date.now() - started).toBeGreaterThanOrEqual(140);
    expect(code(await b.take(orgId, 50).catch((e: unknown) => e))).toBe('insufficient_credits');
    expect(await giveBacks(m.b)).toEqual({ sent: 1, served: 0 });
    expect(await withinBalance(orgId)).toBe(100);
  });

  it('two instances taking turns on a small balance settle on halves instead of asking on every take', async () => {
    const { orgId } = await signUp(t.app);
    const { a, b, m } = await sharedPair('8');
    const tickets = [];
    for (let i = 0; i < 40; i++) tickets.push(await (i % 2 === 0 ? a : b).take(orgId, 2));
    const asked = (await giveBacks(m.a)).sent + (await giveBacks(m.b)).sent;
    expect(asked).toBeGreaterThanOrEqual(1);
    expect(asked).toBeLessThanOrEqual(4);
    expect(await withinBalance(orgId)).toBeLessThanOrEqual(100);
    for (const x of tickets) x.release();
  });

  it('concurrent takes of two instances asking each other never overdraw', async () => {
    const { orgId } = await signUp(t.app);
    const { a, b } = await sharedPair('9', { askWaitMs: 500 });
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        (i % 2 === 0 ? a : b).take(orgId, 7).then(
          (ticket) => ticket.cents,
          () => 0,
        ),
      ),
    );
    const taken = results.reduce((x, y) => x + y, 0);
    // 14 takes of 7 fit in 100; never more, whoever asked whom.
    expect(taken).toBeLessThanOrEqual(98);
    expect(taken).toBeGreaterThan(0);
    expect(a.unused(orgId) + b.unused(orgId) + taken).toBeLessThanOrEqual(100);
    expect(await withinBalance(orgId)).toBeLessThanOrEqual(100);
  });

  it("the server's own reservations ask through its bus, and /metrics counts the requests sent and served", async () => {
    const { orgId } = await signUp(t.app);
    const m = createMetrics();
    const holder = instance('inst_h10', { sliceCents: 500, shared: true, metrics: m });
    await holder.ready;
    const kept = await holder.take(orgId, 10); // the whole 100 reserved by another instance
    const ticket = await t.ctx.reservations.take(orgId, 50);
    expect(await giveBacks(m)).toEqual({ sent: 0, served: 1 });
    const res = await t.app.inject({ method: 'GET', url: '/metrics', remoteAddress: '127.0.0.1' });
    expect(res.body).toMatch(/svc_credit_give_back_requests_total\{role="sent"\} 1\b/);
    expect(await withinBalance(orgId)).toBe(60);
    for (const x of [kept, ticket]) x.release();
  });

  it('holders with nothing to give (all taken by requests in flight) answer at once, and are not asked again right away', async () => {
    const { orgId } = await signUp(t.app);
    const { a, b, m } = await sharedPair('11', { askWaitMs: 2_000 });
    const all = await a.take(orgId, 100);
    const started = Date.now();
    for (let i = 0; i < 3; i++)
      expect(code(await b.take(orgId, 1).catch((e: unknown) => e))).toBe('insufficient_credits');
    expect(Date.now() - started).toBeLessThan(1_500);
    expect(await giveBacks(m.b)).toEqual({ sent: 1, served: 0 });
    expect(await giveBacks(m.a)).toEqual({ sent: 0, served: 1 });
    expect(await withinBalance(orgId)).toBe(100);
    all.release();
  });

  it('a give-back promised in time is waited for past the answer bound (it queues for the account row behind holds)', async () => {
    const { orgId } = await signUp(t.app);
    // The holder's transactions wait at a gate, as behind a queue of holds on the account row.
    let open = true;
    let openGate = () => undefined as void;
    const gate = new Promise<void>((resolve) => (openGate = resolve));
    const slowDb: Db = {
      ...t.ctx.db,
      transaction: async (fn) => {
        if (!open) await gate;
        return t.ctx.db.transaction(fn);
      },
    };
    const holder = instance('inst_h12', { sliceCents: 500, shared: true, askWaitMs: 20, db: slowDb });
    const asker = instance('inst_k12', { sliceCents: 500, shared: true, askWaitMs: 20 });
    await Promise.all([holder.ready, asker.ready]);
    const kept = await holder.take(orgId, 10);
    open = false;
    const heard: string[] = [];
    const stop = await t.ctx.bus.subscribe('credit', (payload) => heard.push(payload));
    const started = Date.now();
    const taking = asker.take(orgId, 50);
    try {
      // The holder promised 90 at once; its give-back commits only well after the 20 ms bound.
      await eventually(() => heard.includes(`giving ${orgId} inst_h12 90`));
      await eventually(() => Date.now() - started > 100);
    } finally {
      openGate();
    }
    const ticket = await taking;
    expect(heard).toContain(`gave ${orgId} inst_h12 90`);
    expect(await withinBalance(orgId)).toBe(60);
    await stop();
    for (const x of [kept, ticket]) x.release();
  });
});

import type { Logger } from 'pino';
import type { Bus } from '../../platform/bus.js';
import type { Db } from '../../platform/db/index.js';
import { ApiError } from '../../platform/errors.js';
import type { Metrics } from '../../platform/metrics.js';
import type { Writer } from '../../platform/writer.js';
import { createGiveBacks, type Serve } from './give-back.js';
import { availableCents, insufficientCredits } from './rules.js';
import type { LedgerReservations } from './service.js';
import {
  growReservation,
  orgsWithExpiredReservations,
  otherReservations,
  reclaimExpired,
  renewReservations,
  reservationAmount,
  reservationsOf,
  returnReservation,
  shrinkReservation,
} from './reservation-store.js';
import { lockAccountForHold } from './store.js';

/**
 * Credit reservations (DESIGN.md sections 4 and 7, docs/billing.md). Each instance sets aside,
 * per organization, part of the available balance in the store (`credit_reservations`, refilled
 * in slices, renewed while it lives, returned when idle or on shutdown) and decides each
 * request's 402 against it in memory: no statement unless the reservation must grow.
 *
 * What a job took stays counted (`taken`) until its hold is in the store; the hold then draws the
 * cents out of the reservation row, and `drawn` takes them off here. A gateway request writes no
 * hold (DESIGN.md section 7, revised 2026-11-27): what it took stays counted until its charge,
 * which draws its cents out of the row, has committed (or it ended without one); a charge written
 * by another instance is learnt with `resync`. The store stays the
 * last word: a hold finding the reservation smaller than this process believed (a job drew on it,
 * it expired) falls back to the unreserved balance and refuses with 402 if that is short, so the
 * balance never goes below zero whatever this memory says.
 *
 * Before a 402, a take whose organization's credit sits in other instances' reservations asks
 * them (bus topic `credit`) to give back their unused part, waits a bounded time for the answers
 * and refills once more; an instance that gave back, or asked, refills that organization by half
 * the free balance at most for a while, so two instances sharing a small balance do not take it
 * from each other on every request.
 */
export interface Reservations extends LedgerReservations {
  /**
   * Takes `cents` of the organization's reservation for a request or job whose hold is about to
   * be written, refilling it from the store when short; 402 `insufficient_credits` when even the
   * available balance cannot cover it. Release the ticket once the hold is written or abandoned
   * (a job), or once the charge has committed or the request ended without one (a gateway
   * request, which writes no hold: gateway/attempts.ts).
   */
  take(orgId: string, cents: number): Promise<CreditTicket>;
  /**
   * Reads this instance's reservation row of `orgId` again and believes no more than it says: a
   * gateway request served here was charged by another instance (its node's receipt reached that
   * one), whose charge drew on this instance's row. Called before that request's credit goes back.
   */
  resync(orgId: string): Promise<void>;
  /** What this process can still take for `orgId` without a statement (tests, metrics). */
  unused(orgId: string): number;
  /** Renews live reservations, returns idle ones and reclaims other instances' expired ones. */
  renew(): Promise<void>;
  /** Stops renewing and returns every reservation of this instance to the balance. */
  close(): Promise<void>;
  /** Resolves once this instance hears other instances' give-back requests (at once without a bus). */
  readonly ready: Promise<void>;
}

/** Cents taken for one hold in the making. */
export interface CreditTicket {
  readonly cents: number;
  /** Gives the cents back to the count (once, however often it is called). */
  release(): void;
}

interface Entry {
  /** The reservation row's amount as this process knows it (never above the row's). */
  amount: number;
  /** Cents taken by holds not yet written. */
  taken: number;
  /** Local clock: the row is renewed until then at least (its expiry less a margin). */
  validUntil: number;
  /** Whether anything was taken since the last renewal (an idle reservation is returned). */
  busy: boolean;
  /** Refills and returns of this organization run one at a time. */
  chain: Promise<unknown>;
  /** Local clock: until then other instances want this organization's credit too (refill by halves). */
  sharedUntil: number;
  /** Cents promised to other instances and not yet taken off the row: no take here counts on them. */
  giving: number;
}

/** What a refill found when the organization's credit could not cover the take. */
interface Short {
  /** Cents this instance could take: its unused reservation plus the unreserved balance. */
  available: number;
  /** Other live instances holding reservations of the organization: those worth asking to give back. */
  holders: string[];
}

export interface ReservationOptions {
  db: Db;
  instanceId: string;
  ttlMs: number;
  sliceCents: number;
  log?: Logger;
  /** How often `renew` runs by itself; 0 for never (tests call it). Default a third of `ttlMs`. */
  renewEveryMs?: number;
  /**
   * Instances sharing the store ask each other through it to give back unused credit before a 402.
   * Without one (a lone instance, some tests) a short take is refused at once.
   */
  bus?: Bus;
  /** The longest a take waits for other instances to answer a give-back request before it answers 402 (default 100 ms). */
  askWaitMs?: number;
  metrics?: Pick<Metrics, 'creditGiveBacks'>;
  /**
   * The group-commit writer, whose records behind earlier answers a take about to be refused lets
   * commit once, then tries again: a request answered a moment ago still holds its maximum cost
   * until its receipt's flush charges what it cost, so without this its client's next request
   * could be refused credit it has.
   */
  writer?: Pick<Writer, 'pending' | 'settled'>;
}

/**
 * @example
 * const reservations = createReservations({ db, instanceId: 'inst_1', ttlMs: 30_000, sliceCents: 500 });
 * const ledger = createLedger(db, reservations);
 * const ticket = await reservations.take(orgId, 12); // 402 here, before any statement, when short
 * try { await ledger.hold(orgId, 12, requestId); } finally { ticket.release(); }
 */
export function createReservations(options: ReservationOptions): Reservations {
  const { db, instanceId, ttlMs, sliceCents, log, bus, metrics } = options;
  // Renewals run every third of the lifetime: a row is trusted until two thirds of it are left.
  const margin = Math.ceil(ttlMs / 3);
  const entries = new Map<string, Entry>();
  let closed = false;

  const entryOf = (orgId: string): Entry => {
    let entry = entries.get(orgId);
    if (!entry) {
      entry = {
        amount: 0,
        taken: 0,
        validUntil: 0,
        busy: false,
        chain: Promise.resolve(),
        sharedUntil: 0,
        giving: 0,
      };
      entries.set(orgId, entry);
    }
    return entry;
  };
  const unusedOf = (entry: Entry | undefined) =>
    entry && entry.validUntil > Date.now() ? Math.max(0, entry.amount - entry.taken - entry.giving) : 0;
  const serial = <T>(entry: Entry, fn: () => Promise<T>): Promise<T> => {
    const run = entry.chain.then(fn, fn);
    entry.chain = run.catch(() => undefined);
    return run;
  };

  /** Grows the reservation so that `cents` more can be taken; what it found when it cannot. */
  const refill = (orgId: string, entry: Entry, cents: number): Promise<Short | undefined> =>
    serial(entry, async () => {
      const need = cents - unusedOf(entry);
      if (need <= 0) return undefined;
      const before = Date.now();
      const result = await db.transaction(async (q): Promise<{ amount: number; short: Short | undefined }> => {
        const account = await lockAccountForHold(q, orgId, instanceId);
        if (!account) throw new ApiError('not_found', `organization ${orgId} has no credit account`);
        const freed = await reclaimExpired(q, orgId);
        const own = Number(account.own_reserved_cents);
        const free = availableCents(account) + freed;
        if (free < need) {
          const available = own - entry.taken - entry.giving + free;
          // Asking is worth it only when the others' reservations could make up the difference.
          const others = Number(account.reserved_cents ?? 0) - freed - own;
          const holders =
            bus && others > 0 && available + others >= cents ? await otherReservations(q, orgId, instanceId) : [];
          return { amount: own, short: { available, holders: holders.map((h) => h.instanceId) } };
        }
        // A slice, or half the free balance while other instances want this organization's credit too.
        const slice = entry.sharedUntil > Date.now() ? Math.min(sliceCents, Math.ceil(free / 2)) : sliceCents;
        const amount = await growReservation(q, {
          orgId,
          instanceId,
          cents: Math.min(free, Math.max(need, slice)),
          ttlMs,
        });
        return { amount, short: undefined };
      });
      entry.amount = result.amount;
      entry.validUntil = before + ttlMs - margin;
      return result.short;
    });

  const giveBack = (orgId: string, entry: Entry): Promise<void> =>
    serial(entry, async () => {
      if (entry.taken > 0 || entry.busy) return;
      entry.validUntil = 0;
      await db.transaction(async (q) => {
        await lockAccountForHold(q, orgId, instanceId);
        await returnReservation(q, orgId, instanceId);
      });
      entry.amount = 0;
      if (entry.taken === 0 && !entry.busy) entries.delete(orgId);
    });

  /**
   * Sets aside the unused part of this instance's reservation for an instance that asked (never
   * what in-flight holds have taken: no take here counts on it from now), then takes it off the
   * row under the account lock.
   */
  const serve: Serve = (orgId) => {
    const entry = entries.get(orgId);
    if (!entry || closed) return undefined;
    entry.sharedUntil = Date.now() + ttlMs;
    const spare = Math.max(0, entry.amount - entry.taken - entry.giving);
    if (spare === 0) return { promised: 0, given: Promise.resolve(0) };
    entry.giving += spare;
    const given = serial(entry, () =>
      db.transaction(async (q) => {
        await lockAccountForHold(q, orgId, instanceId);
        const cut = await shrinkReservation(q, { orgId, instanceId, cents: spare });
        entry.amount = Math.max(0, entry.amount - cut);
        return cut;
      }),
    )
      .catch((err: unknown) => {
        log?.warn({ err, org_id: orgId }, 'credit reservations: give-back failed');
        return 0;
      })
      .finally(() => (entry.giving -= spare));
    return { promised: spare, given };
  };
  const giveBacks = bus
    ? createGiveBacks({ bus, instanceId, askWaitMs: options.askWaitMs ?? 100, ttlMs, serve, log, metrics })
    : undefined;

  const reservations: Reservations = {
    instanceId,
    ready: giveBacks?.ready ?? Promise.resolve(),

    drawn(orgId, cents) {
      const entry = entries.get(orgId);
      if (entry) entry.amount = Math.max(0, entry.amount - cents);
    },

    async take(orgId, cents) {
      if (closed) throw new ApiError('no_capacity', 'the server is shutting down; retry on another instance');
      const entry = entryOf(orgId);
      entry.busy = true;
      let asked = false;
      let settled = false;
      for (let attempt = 0; unusedOf(entry) < cents; attempt++) {
        const short = await refill(orgId, entry, cents);
        // Short when it asked, but credit came back meanwhile: a gateway request's charge committed
        // during the refill and its credit was released (it stays taken until then): take again.
        if (short !== undefined && unusedOf(entry) >= cents) continue;
        if (short !== undefined) {
          // Once per take: holds of requests already answered may be about to shrink to their charge.
          if (!settled && options.writer && options.writer.pending > 0) {
            settled = true;
            await options.writer.settled();
            continue;
          }
          // Once per take: other instances may sit on this organization's credit unused.
          const holders = asked || !giveBacks ? [] : giveBacks.askable(orgId, short.holders);
          if (holders.length > 0 && giveBacks) {
            asked = true;
            // Asking, this instance wants the organization's credit with others: it refills by halves.
            entry.sharedUntil = Date.now() + ttlMs;
            await giveBacks.ask(orgId, holders, cents - short.available);
            continue;
          }
          throw insufficientCredits(Math.max(0, short.available), cents);
        }
        if (attempt >= 3) throw insufficientCredits(unusedOf(entry), cents);
      }
      entry.taken += cents;
      let open = true;
      return {
        cents,
        release() {
          if (!open) return;
          open = false;
          entry.taken -= cents;
        },
      };
    },

    async resync(orgId) {
      const entry = entries.get(orgId);
      if (!entry) return;
      await serial(entry, async () => {
        // Never above the row: a draw this process made meanwhile already lowered `amount` itself.
        entry.amount = Math.min(entry.amount, await reservationAmount(db, orgId, instanceId));
      });
    },

    unused: (orgId) => unusedOf(entries.get(orgId)),

    async renew() {
      const idle: string[] = [];
      const live: string[] = [];
      for (const [orgId, entry] of entries) {
        if (!entry.busy && entry.taken === 0) idle.push(orgId);
        else if (entry.validUntil > 0) live.push(orgId);
        entry.busy = false;
      }
      for (const orgId of idle) {
        const entry = entries.get(orgId);
        if (entry) await giveBack(orgId, entry);
      }
      const before = Date.now();
      const kept = await renewReservations(db, instanceId, live, ttlMs);
      for (const orgId of live) {
        const entry = entries.get(orgId);
        if (!entry) continue;
        const amount = kept.get(orgId);
        if (amount === undefined) {
          // Expired and reclaimed (this process stalled): the next take asks the store again.
          entry.amount = 0;
          entry.validUntil = 0;
        } else {
          entry.amount = Math.min(entry.amount, amount);
          entry.validUntil = before + ttlMs - margin;
        }
      }
      for (const orgId of await orgsWithExpiredReservations(db, 50)) {
        await db.transaction(async (q) => {
          await lockAccountForHold(q, orgId, null);
          await reclaimExpired(q, orgId);
        });
      }
    },

    async close() {
      closed = true;
      clearInterval(timer);
      await giveBacks?.close();
      for (const orgId of await reservationsOf(db, instanceId)) {
        await db.transaction(async (q) => {
          await lockAccountForHold(q, orgId, null);
          await returnReservation(q, orgId, instanceId);
        });
      }
      entries.clear();
    },
  };

  const every = options.renewEveryMs ?? margin;
  const timer =
    every > 0
      ? setInterval(() => {
          if (!closed)
            reservations.renew().catch((err: unknown) => log?.warn({ err }, 'credit reservations: renewal failed'));
        }, every)
      : undefined;
  timer?.unref();
  return reservations;
}

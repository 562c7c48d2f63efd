import type { Logger } from 'pino';
import type { Db } from '../../platform/db/index.js';
import { ApiError } from '../../platform/errors.js';
import { availableCents, insufficientCredits } from './rules.js';
import type { LedgerReservations } from './service.js';
import {
  growReservation,
  orgsWithExpiredReservations,
  reclaimExpired,
  renewReservations,
  reservationsOf,
  returnReservation,
} from './reservation-store.js';
import { lockAccountForHold } from './store.js';

/**
 * Credit reservations (DESIGN.md sections 4 and 7, docs/billing.md). Each instance sets aside,
 * per organization, part of the available balance in the store (`credit_reservations`, refilled
 * in slices, renewed while it lives, returned when idle or on shutdown) and decides each
 * request's 402 against it in memory: no statement unless the reservation must grow.
 *
 * What a request took stays counted (`taken`) until its hold is in the store; the hold then draws
 * the cents out of the reservation row, and `drawn` takes them off here. The store stays the
 * last word: a hold finding the reservation smaller than this process believed (a job drew on it,
 * it expired) falls back to the unreserved balance and refuses with 402 if that is short, so the
 * balance never goes below zero whatever this memory says.
 */
export interface Reservations extends LedgerReservations {
  /**
   * Takes `cents` of the organization's reservation for a request or job whose hold is about to
   * be written, refilling it from the store when short; 402 `insufficient_credits` when even the
   * available balance cannot cover it. Release the ticket once the hold is written or abandoned.
   */
  take(orgId: string, cents: number): Promise<CreditTicket>;
  /** What this process can still take for `orgId` without a statement (tests, metrics). */
  unused(orgId: string): number;
  /** Renews live reservations, returns idle ones and reclaims other instances' expired ones. */
  renew(): Promise<void>;
  /** Stops renewing and returns every reservation of this instance to the balance. */
  close(): Promise<void>;
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
}

export interface ReservationOptions {
  db: Db;
  instanceId: string;
  ttlMs: number;
  sliceCents: number;
  log?: Logger;
  /** How often `renew` runs by itself; 0 for never (tests call it). Default a third of `ttlMs`. */
  renewEveryMs?: number;
}

/**
 * @example
 * const reservations = createReservations({ db, instanceId: 'inst_1', ttlMs: 30_000, sliceCents: 500 });
 * const ledger = createLedger(db, reservations);
 * const ticket = await reservations.take(orgId, 12); // 402 here, before any statement, when short
 * try { await ledger.hold(orgId, 12, requestId); } finally { ticket.release(); }
 */
export function createReservations(options: ReservationOptions): Reservations {
  const { db, instanceId, ttlMs, sliceCents, log } = options;
  // Renewals run every third of the lifetime: a row is trusted until two thirds of it are left.
  const margin = Math.ceil(ttlMs / 3);
  const entries = new Map<string, Entry>();
  let closed = false;

  const entryOf = (orgId: string): Entry => {
    let entry = entries.get(orgId);
    if (!entry) {
      entry = { amount: 0, taken: 0, validUntil: 0, busy: false, chain: Promise.resolve() };
      entries.set(orgId, entry);
    }
    return entry;
  };
  const unusedOf = (entry: Entry | undefined) =>
    entry && entry.validUntil > Date.now() ? Math.max(0, entry.amount - entry.taken) : 0;
  const serial = <T>(entry: Entry, fn: () => Promise<T>): Promise<T> => {
    const run = entry.chain.then(fn, fn);
    entry.chain = run.catch(() => undefined);
    return run;
  };

  /** Grows the reservation so that `cents` more can be taken; the cents then available (unused + unreserved) when it cannot. */
  const refill = (orgId: string, entry: Entry, cents: number): Promise<number | undefined> =>
    serial(entry, async () => {
      const need = cents - unusedOf(entry);
      if (need <= 0) return undefined;
      const before = Date.now();
      const result = await db.transaction(async (q) => {
        const account = await lockAccountForHold(q, orgId, instanceId);
        if (!account) throw new ApiError('not_found', `organization ${orgId} has no credit account`);
        const freed = await reclaimExpired(q, orgId);
        const own = Number(account.own_reserved_cents);
        const free = availableCents(account) + freed;
        if (free < need) return { amount: own, short: own - entry.taken + free };
        const amount = await growReservation(q, {
          orgId,
          instanceId,
          cents: Math.min(free, Math.max(need, sliceCents)),
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

  const reservations: Reservations = {
    instanceId,

    drawn(orgId, cents) {
      const entry = entries.get(orgId);
      if (entry) entry.amount = Math.max(0, entry.amount - cents);
    },

    async take(orgId, cents) {
      if (closed) throw new ApiError('no_capacity', 'the server is shutting down; retry on another instance');
      const entry = entryOf(orgId);
      entry.busy = true;
      for (let attempt = 0; unusedOf(entry) < cents; attempt++) {
        const short = await refill(orgId, entry, cents);
        if (short !== undefined) throw insufficientCredits(Math.max(0, short), cents);
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

import { NODE_CHANNEL_MAX_GRANTED } from '@svc/protocol';
import type { ServiceContext } from '../../service-context.js';
import type { NodeRow } from '../nodes/store.js';
import type { Handoff } from './handoff.js';
import { takeWork } from './node-work.js';
import { undispatchWork, type WorkRow } from './store.js';

/** How often standing slots look in the store without being told to (a missed message only delays). */
const LOOK_AGAIN_MS = 25_000;

/** Work marked dispatched that never reached the node: back to the store, for its next poll or grant. */
export async function giveBackWork(ctx: ServiceContext, nodeId: string, rows: WorkRow[]): Promise<void> {
  for (const row of rows) {
    // Direct work handed over before its owner's opening was written: its row is stored dispatched first.
    await ctx.completions.direct.settled(ctx, [row.id]);
    await undispatchWork(ctx.db, row.id);
  }
  await ctx.bus.publish('jobs', `node:${nodeId}`);
}

/**
 * A node channel's standing slots (docs/node-protocol.md, "Standing slots"): the capacity the node
 * granted and has not been sent work for. While any is free the channel stands among the
 * scheduler's waiters, so work leased to the node in this process (direct work, a failover, a
 * signalled job) is pushed down the channel at once, one slot per item, and work waiting in the
 * store is taken as soon as a message says it may be there.
 */
export interface StandingSlots {
  /** Adds `slots` granted by the node's message `re`; false (nothing added) past {@link NODE_CHANNEL_MAX_GRANTED}. */
  grant(slots: number, re: number): boolean;
  /** Looks in the store for work to fill free slots (after a receipt or a failure, a job may be claimable). */
  look(): void;
  /** The channel closed: no more slots; a hand-over under way finds none. */
  close(): void;
  /** Granted slots neither spent nor reserved by a hand-over under way. */
  readonly free: number;
}

/**
 * Standing slots of `node`'s channel; `push` sends work down the channel (naming the grant `re`
 * it draws on) and answers false when the channel can no longer send: that work goes back to the
 * store for the node's next poll or grant.
 *
 * @example
 * const slots = createStandingSlots(ctx, node, (rows, re) => sendWork(rows, re));
 * slots.grant(16, message.seq);
 */
export function createStandingSlots(
  ctx: ServiceContext,
  node: NodeRow,
  push: (rows: WorkRow[], re: number) => boolean,
): StandingSlots {
  let free = 0;
  // Slots taken by a hand-over under way: they count against the grant limit.
  let reserved = 0;
  let lastGrant = 0;
  let closed = false;
  let looking = false;
  let again = false;
  let unstand: (() => void) | undefined;
  let timer: NodeJS.Timeout | undefined;

  const giveBack = (rows: WorkRow[]) => giveBackWork(ctx, node.id, rows);

  const reserve = (): Handoff | undefined => {
    if (closed || free <= 0) return undefined;
    free--;
    reserved++;
    let state: 'reserved' | 'done' = 'reserved';
    return {
      deliver(work) {
        if (state !== 'reserved') return false;
        state = 'done';
        reserved--;
        if (closed) return false;
        // One slot was reserved; a hand-over of several items spends one each.
        free -= work.length - 1;
        return push(work, lastGrant);
      },
      release() {
        if (state !== 'reserved') return;
        state = 'done';
        reserved--;
        if (closed) return;
        free++;
        // A job signalled while this slot was reserved found none free and stayed in the store, and
        // a claim meanwhile may have skipped it (locked by the hand-over's transaction): look now, as
        // a released poll does, not at the next look-again (LOOK_AGAIN_MS).
        look();
      },
    };
  };

  const run = async () => {
    looking = true;
    try {
      do {
        again = false;
        if (closed || free <= 0) break;
        // The slots stay free meanwhile, for a hand-over; what no longer fits afterwards goes back.
        const n = free;
        const rows = await takeWork(ctx, node, n);
        const fit = closed ? 0 : Math.min(rows.length, free);
        const sent = rows.slice(0, fit);
        if (sent.length > 0) {
          free -= sent.length;
          if (!push(sent, lastGrant)) await giveBack(sent);
        }
        if (rows.length > fit) await giveBack(rows.slice(fit));
        // Every slot filled: more may wait in the store.
        if (rows.length === n && !closed) again = true;
        // `again` is also set by a `look` that came while this one was under way.
      } while (again);
    } catch (err) {
      ctx.log.error({ err, node_id: node.id }, 'node channel: looking for work failed');
    } finally {
      looking = false;
    }
  };

  const look = () => {
    if (closed) return;
    if (looking) again = true;
    else void run();
  };

  return {
    grant(slots, re) {
      if (closed || free + reserved + slots > NODE_CHANNEL_MAX_GRANTED) return false;
      free += slots;
      lastGrant = re;
      if (unstand === undefined) {
        unstand = ctx.jobSignal.stand(node, { wake: look, reserve, free: () => free });
        timer = setInterval(look, LOOK_AGAIN_MS);
        timer.unref();
      }
      look();
      return true;
    },
    look,
    close() {
      closed = true;
      free = 0;
      unstand?.();
      clearInterval(timer);
    },
    get free() {
      return free;
    },
  };
}

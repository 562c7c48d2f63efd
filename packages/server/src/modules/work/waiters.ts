import type { ServiceContext } from '../../service-context.js';
import type { Queryable } from '../../platform/db/index.js';
import type { MatchNode } from '../nodes/match-node.js';
import type { Handoff } from './handoff.js';
import type { WorkRow } from './store.js';

/** Wakes long-polling nodes in this process when any instance says a job became eligible. */
export interface JobSignal {
  /**
   * Resolves after `ms`, when a job this node may take is signalled (or, for a node with an
   * `id`, work leased straight to it: `node:<id>`), or when `signal` aborts (the node hung up),
   * or when `wake` aborts (look again), whichever is first. Resolves with the work when it was
   * handed over in memory ({@link JobSignal.reserve}): a wait reserved for a hand-over ignores
   * `wake` and delivers, but refuses the work once `signal` aborted.
   */
  wait(
    node: MatchNode & { id?: string },
    ms: number,
    signal?: AbortSignal,
    wake?: AbortSignal,
  ): Promise<WorkRow[] | undefined>;
  /**
   * Takes this process's waiting poll of `nodeId` out of the waiters, so that work leased to
   * the node can be handed to it in memory: no take statement, no wake-up and no second look in
   * the store. Undefined when no poll of that node waits here. The caller must `deliver` or
   * `release` it; until then its timeout and wake-ups wait for that.
   */
  reserve(nodeId: string): Handoff | undefined;
  /**
   * Adds a standing waiter for `node` (a node channel's granted slots): unlike a poll's wait it
   * stays among the waiters until the returned function removes it. A message for it (a job it may
   * take, `node:<id>`) calls `standing.wake`; a hand-over ({@link JobSignal.reserve},
   * {@link JobSignal.reserveFor}) calls `standing.reserve`, which takes one slot or answers
   * undefined when none is free. A reserved standing waiter moves to the back of the line, so
   * signalled jobs rotate among nodes with free slots.
   */
  stand(node: MatchNode & { id?: string }, standing: Pick<Waiter, 'wake' | 'reserve'> & { free(): number }): () => void;
  /**
   * Takes out of the waiters the longest-waiting poll of this process whose node `accepts`, so that
   * a job just queued can be assigned to it in the same transaction and handed over in memory (see
   * `reserveWaitingNode` in scheduler/service.ts). Undefined when no waiting node is accepted. The caller
   * must `deliver` or `release` the handoff.
   */
  reserveFor<N extends MatchNode & { id?: string }>(
    accepts: (node: MatchNode & { id?: string }) => node is N,
  ): { node: N; handoff: Handoff } | undefined;
  /**
   * From now on, a job message is read through `jobs`: the pending job it names goes to a node
   * waiting here that may take it, assigned in memory instead of waking the node to claim (the
   * scheduler's `assignSignalledJob`; installed by its `startBackgroundTasks`). Until then every
   * job message wakes every waiter, which looks in the store.
   */
  dispatchWith(jobs: SignalledJobs): void;
  /** A counter of the job messages heard (not `node:<id>`): read it before a claim, hand it to {@link JobSignal.nothingToClaim}. */
  generation(): number;
  /**
   * Whether a claim by this node may find a job: false only while nothing was signalled since its
   * last claim found no eligible pending job, and for at most {@link CLAIM_RECHECK_MS} (a missed
   * message only delays). Spares a node's immediate re-poll the claim's queries.
   */
  shouldClaim(nodeId: string): boolean;
  /** The node's claim, started at `generation`, found no eligible pending job. */
  nothingToClaim(nodeId: string, generation: number): void;
  /** A counter of the `node:<id>` messages heard for this node: read it before taking its leased work. */
  leasedGeneration(nodeId: string): number;
  /**
   * Whether work may be leased to this node and not yet handed out: false only while no
   * `node:<id>` message was heard since a take that left none behind, and for at most
   * {@link CLAIM_RECHECK_MS}. Direct work is leased before its message is sent, so a take that
   * began after the message saw the work. Spares a node's re-poll after each item a statement.
   */
  shouldTakeLeased(nodeId: string): boolean;
  /** The node's take of its leased work, started at `generation`, left none behind. */
  leasedDrained(nodeId: string, generation: number): void;
}

/**
 * What the poll waiters ask of the scheduler about a job message (they sit below it, in the node
 * protocol, and know neither jobs' rows nor the matching rules): the scheduler implements it and
 * installs it with {@link JobSignal.dispatchWith}.
 *
 * @example
 * signal.dispatchWith({ find: async (db, jobId) => (await isPending(db, jobId)) ? { accepts, dispatch } : 'not-pending' });
 */
export interface SignalledJobs {
  /**
   * The job a message names: undefined when there is none (every waiter looks again),
   * `not-pending` when it was already taken (nobody is woken), else the pending job.
   */
  find(db: Queryable, jobId: string): Promise<SignalledJob | 'not-pending' | undefined>;
}

/** A signalled pending job, as the waiters see it. */
export interface SignalledJob {
  /** Whether a waiting node may take it (the matching rules). */
  accepts(node: MatchNode & { id?: string }): boolean;
  /**
   * Assigns it to the waiting node reserved for it and hands the work over, or gives the poll back:
   * `full` (the node has no room), `gone` (the job was no longer pending).
   */
  dispatch(node: MatchNode & { id?: string }, handoff: Handoff): Promise<'assigned' | 'full' | 'gone'>;
}

/** How many waiting nodes a signalled job is offered to before it is left for the claims. */
const DISPATCH_TRIES = 3;

/** The longest a node goes without a claim while no job is signalled. */
export const CLAIM_RECHECK_MS = 5_000;

/** A poll's wait, or a channel's standing slots ({@link JobSignal.stand}). */
export interface Waiter {
  node: MatchNode & { id?: string };
  wake: () => void;
  reserve: () => Handoff | undefined;
  /** Stays among the waiters when reserved (a channel's standing slots), with this many slots free. */
  standing?: { free(): number };
}

/** A `node:<id>` signal that found no waiter is kept this long, for a poll between two waits. */
const NODE_WAKE_KEEP_MS = 10_000;

/**
 * Targeted wake-ups: a signal naming a job wakes only the longest-waiting node of this process
 * that is eligible for it (not every waiting node, which would make each submission cost one
 * claim per waiting node); any other signal (a requeue) wakes all.
 */
export async function createJobSignal(
  ctx: Pick<ServiceContext, 'bus' | 'db'>,
): Promise<{ signal: JobSignal; close: () => Promise<void> }> {
  const waiters = new Set<Waiter>();
  // Work leased to a node that is between two waits (claiming): its next wait returns at once.
  const missed = new Map<string, number>();
  const wakeFor = async (payload: string) => {
    if (payload.startsWith('node:')) {
      const nodeId = payload.slice(5);
      // Every waiter of the node: its channel's standing slots and a poll may both wait.
      const ofNode = [...waiters].filter((w) => w.node.id === nodeId);
      for (const waiter of ofNode) waiter.wake();
      if (ofNode.length === 0) {
        for (const [id, until] of missed) if (until < Date.now()) missed.delete(id);
        missed.set(nodeId, Date.now() + NODE_WAKE_KEEP_MS);
      }
      return;
    }
    if (waiters.size === 0) return;
    const job = payload.startsWith('job_') && jobs ? await jobs.find(ctx.db, payload) : undefined;
    if (!job) {
      for (const w of [...waiters]) w.wake();
      return;
    }
    if (job === 'not-pending') return;
    // Matched here, in memory: the job goes straight to a waiting node that may take it (a full
    // one is passed over), without waking it to claim. Another instance may take it first.
    for (let tries = 0; tries < DISPATCH_TRIES; tries++) {
      const taken = signal.reserveFor((node): node is MatchNode & { id?: string } => job.accepts(node));
      if (!taken) return;
      if ((await job.dispatch(taken.node, taken.handoff)) !== 'full') return;
    }
  };
  let jobs: SignalledJobs | undefined;
  let generation = 0;
  const emptyClaims = new Map<string, { generation: number; at: number }>();
  const nodeMessages = new Map<string, number>();
  const drained = new Map<string, { generation: number; at: number }>();
  const unsubscribe = await ctx.bus.subscribe('jobs', (payload) => {
    // `node:<id>` names direct work, leased straight to that node, not a job to claim.
    if (payload.startsWith('node:')) {
      const nodeId = payload.slice(5);
      if (nodeMessages.size >= 100_000 && !nodeMessages.has(nodeId)) {
        // Forgetting counts would let an old mark match again: forget the marks with them.
        nodeMessages.clear();
        drained.clear();
      }
      nodeMessages.set(nodeId, (nodeMessages.get(nodeId) ?? 0) + 1);
    } else generation++;
    void wakeFor(payload).catch(() => undefined);
  });
  // Cleared maps only ever make a poll look again: a missing entry means "may have work".
  const skip = (marks: Map<string, { generation: number; at: number }>, nodeId: string, current: number) => {
    const mark = marks.get(nodeId);
    return mark !== undefined && mark.generation === current && Date.now() - mark.at < CLAIM_RECHECK_MS;
  };
  const remember = (marks: Map<string, { generation: number; at: number }>, nodeId: string, seen: number) => {
    if (marks.size >= 100_000) marks.clear();
    marks.set(nodeId, { generation: seen, at: Date.now() });
  };
  // A poll handed work in memory had been waiting all along, hearing every message: when none came
  // since its node's last empty claim (or drained take), the next poll may skip those again, for a
  // new interval. Without this, a node served in memory every few seconds would run a claim and a
  // take on each re-poll, for nothing.
  const renew = (marks: Map<string, { generation: number; at: number }>, nodeId: string, current: number) => {
    const mark = marks.get(nodeId);
    if (mark !== undefined && mark.generation === current) mark.at = Date.now();
  };
  const handedOver = (nodeId: string | undefined) => {
    if (nodeId === undefined) return;
    renew(emptyClaims, nodeId, generation);
    renew(drained, nodeId, nodeMessages.get(nodeId) ?? 0);
  };
  const reserveWaiter = (w: Waiter) => {
    const handoff = w.reserve();
    if (handoff && w.standing) {
      // To the back of the line (a reserved poll leaves it): the next signalled job tries others first.
      waiters.delete(w);
      waiters.add(w);
    }
    return handoff;
  };
  const signal: JobSignal = {
    dispatchWith: (installed) => {
      jobs = installed;
    },
    generation: () => generation,
    shouldClaim: (nodeId) => !skip(emptyClaims, nodeId, generation),
    nothingToClaim: (nodeId, seen) => remember(emptyClaims, nodeId, seen),
    leasedGeneration: (nodeId) => nodeMessages.get(nodeId) ?? 0,
    shouldTakeLeased: (nodeId) => !skip(drained, nodeId, nodeMessages.get(nodeId) ?? 0),
    leasedDrained: (nodeId, seen) => remember(drained, nodeId, seen),
    wait(node, ms, abort, wake) {
      if (wake?.aborted) return Promise.resolve(undefined);
      const missedUntil = node.id === undefined ? undefined : missed.get(node.id);
      if (node.id !== undefined && missedUntil !== undefined) {
        missed.delete(node.id);
        if (missedUntil > Date.now()) return Promise.resolve(undefined);
      }
      return new Promise<WorkRow[] | undefined>((resolve) => {
        // Reserved, the poll ends when the reservation says so, not on its timer or a wake-up.
        let state: 'waiting' | 'reserved' | 'done' = 'waiting';
        const finish = (work?: WorkRow[]) => {
          state = 'done';
          clearTimeout(timer);
          waiters.delete(waiter);
          abort?.removeEventListener('abort', done);
          wake?.removeEventListener('abort', done);
          resolve(work);
        };
        const done = () => {
          if (state === 'waiting') finish();
        };
        const waiter: Waiter = {
          node,
          wake: done,
          reserve: () => {
            if (state !== 'waiting' || abort?.aborted) return undefined;
            state = 'reserved';
            // Out of the waiters: a `node:<id>` message meanwhile is kept for its next wait.
            waiters.delete(waiter);
            return {
              deliver: (work) => {
                if (state !== 'reserved') return false;
                const handed = !abort?.aborted;
                if (handed) handedOver(node.id);
                finish(handed ? work : undefined);
                return handed;
              },
              release: () => {
                if (state === 'reserved') finish();
              },
            };
          },
        };
        const timer = setTimeout(done, ms);
        waiters.add(waiter);
        abort?.addEventListener('abort', done, { once: true });
        wake?.addEventListener('abort', done, { once: true });
      });
    },
    reserve(nodeId) {
      for (const w of waiters) {
        if (w.node.id !== nodeId) continue;
        const handoff = reserveWaiter(w);
        if (handoff) return handoff;
      }
      return undefined;
    },
    reserveFor(accepts) {
      // A Set iterates in insertion order: the longest-waiting poll first.
      for (const w of waiters) {
        const node = w.node;
        if (!accepts(node)) continue;
        const handoff = reserveWaiter(w);
        if (handoff) return { node, handoff };
      }
      return undefined;
    },
    stand(node, standing) {
      const waiter: Waiter = { node, wake: standing.wake, reserve: standing.reserve, standing };
      waiters.add(waiter);
      return () => waiters.delete(waiter);
    },
  };
  return { signal, close: unsubscribe };
}

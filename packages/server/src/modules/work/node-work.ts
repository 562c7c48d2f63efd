import type { ServiceContext } from '../../service-context.js';
import { touchNode, type NodeRow } from '../nodes/store.js';
import { workItemView } from './view.js';
import {
  failUnlistedLapsed,
  jobWorkAmong,
  lapsedAttempts,
  renewLeases,
  takeLeasedWork,
  type WorkRow,
} from './store.js';

/**
 * The node's long-poll: first hands out direct work already leased to this node (skipped while no
 * `node:<id>` message came since a take that left none: see `JobSignal.shouldTakeLeased`), then
 * claims eligible jobs (unless its last claim found none and no job was signalled since: see
 * `JobSignal.shouldClaim`); else waits for a signal (from any instance) until `waitMs` runs out,
 * and looks again each time it is woken. Direct work leased to the node while it waits in this
 * process is handed to the wait itself (`JobSignal.reserve`).
 */
export async function pollWork(
  ctx: ServiceContext,
  node: NodeRow,
  options: {
    waitMs: number;
    max: number;
    /** The node hung up: return at once, and work handed over meanwhile goes back. */
    signal?: AbortSignal;
    /** Look again: ends the wait with no work (a hand-over already under way still delivers). */
    wake?: AbortSignal;
  },
) {
  const deadline = Date.now() + options.waitMs;
  for (;;) {
    const found = await takeWork(ctx, node, options.max, { always: options.waitMs === 0 });
    if (found.length > 0) return { work: found.map(workItemView) };
    const left = deadline - Date.now();
    if (left <= 0 || options.signal?.aborted) return { work: [] };
    const handed = await ctx.jobSignal.wait(node, left, options.signal, options.wake);
    if (handed && handed.length > 0) return { work: handed.map(workItemView) };
    // A poll whose node hung up takes nothing more: work handed to it meanwhile went back to its
    // next poll. One told to look again returns to its caller, which polls anew.
    if (options.signal?.aborted || options.wake?.aborted) return { work: [] };
  }
}

/**
 * One look in the store for the node, as a poll takes it: up to `max` items of direct work already
 * leased to it, else jobs it may claim. Each look is skipped while the
 * signal's marks say it would find nothing (`JobSignal.shouldTakeLeased`, `shouldClaim`), unless
 * `always` (a poll that will not wait: a message may still be on its way). Used by the long-poll
 * and by the node channel's standing slots.
 */
export async function takeWork(
  ctx: ServiceContext,
  node: NodeRow,
  max: number,
  options: { always?: boolean } = {},
): Promise<WorkRow[]> {
  if (options.always || ctx.jobSignal.shouldTakeLeased(node.id)) {
    const heard = ctx.jobSignal.leasedGeneration(node.id);
    const leased = await takeLeasedWork(ctx.db, node.id, max, ctx.config.leaseSeconds);
    // Fewer than asked for: nothing leased before `heard` is left behind.
    if (leased.length < max) ctx.jobSignal.leasedDrained(node.id, heard);
    if (leased.length > 0) return leased;
  }
  const seen = ctx.jobSignal.generation();
  if (options.always || ctx.jobSignal.shouldClaim(node.id)) {
    const { work, noneEligible } = await ctx.completions.claimJobs(ctx, node, max);
    if (work.length > 0) return work;
    if (noneEligible) ctx.jobSignal.nothingToClaim(node.id, seen);
  }
  return [];
}

/**
 * Renews the leases of the work the node says it runs and tells it what to stop: work it no
 * longer holds (cancelled by the buyer, or the lease was lost and the job went elsewhere), but
 * never a lapsed attempt of direct work whose owner still takes its receipt. When the owner of
 * direct work takes lapsed attempts, a lapsed one the node does not list becomes `failed` (it
 * holds no receipt for it). A job's first heartbeat moves it from `assigned` to `running`.
 */
export async function heartbeat(
  ctx: ServiceContext,
  node: NodeRow,
  body: { load?: number; active_work?: string[]; models?: string[]; free_vram_bytes?: number },
) {
  const active = body.active_work ?? [];
  const direct = ctx.completions.direct;
  // Direct work handed over before its owner's opening committed is not gone: its row is being written.
  await direct.settled(ctx, active);
  const renewal = await renewLeases(ctx.db, node.id, active, ctx.config.leaseSeconds);
  const { renewed } = renewal;
  let gone = renewal.gone;
  if (direct.takesLapsed) {
    // A lapsed attempt the node still lists may hold its signed receipt, and the owner still takes
    // it while it runs on that attempt: told to stop, the node would drop the receipt (work
    // answered, never charged). It keeps it; the others are gone.
    const lapsed = await lapsedAttempts(ctx.db, node.id, gone);
    const kept = new Set(lapsed.length > 0 ? await direct.lapsedStillOpen(ctx, lapsed) : []);
    gone = gone.filter((id) => !kept.has(id));
    // The lapsed ones it no longer lists: it holds no receipt for them; their owners may end.
    for (const workId of await failUnlistedLapsed(ctx.db, node.id, active)) await ctx.bus.publish('work', workId);
  }
  await touchNode(ctx.db, node.id, {
    load: body.load,
    models: body.models,
    freeVram: body.free_vram_bytes,
    activeWork: renewed.length,
  });
  ctx.nodeDirectory.seen(node.id, { models: body.models });
  if (renewed.length > 0) await ctx.completions.job.started(ctx, node, await jobWorkAmong(ctx.db, renewed));
  return { cancel: gone, lease_expires_at: new Date(Date.now() + ctx.config.leaseSeconds * 1000).toISOString() };
}

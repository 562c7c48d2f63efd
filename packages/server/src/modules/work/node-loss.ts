import type { ServiceContext } from '../../service-context.js';
import { forgetTouch } from '../nodes/node-auth.js';
import { markNodeUnreachable } from '../nodes/store.js';
import { NODE_LIVE_SECONDS } from '../system/service.js';
import { shortenDirectLeases } from './store.js';

/**
 * The node is no longer routed to, on any instance, until its next signed call
 * (`markNodeUnreachable`, announced by the store; this instance's directory is told at once),
 * unless the store recorded a call of it within the last `quietSeconds`. True when it was marked.
 */
async function takeForGone(ctx: ServiceContext, nodeId: string, quietSeconds: number): Promise<boolean> {
  if (!(await markNodeUnreachable(ctx.db, nodeId, { liveSeconds: NODE_LIVE_SECONDS, quietSeconds }))) return false;
  await ctx.nodeDirectory.changed(nodeId);
  return true;
}

/**
 * A node's channel dropped while this instance runs, and no other channel of it is open here:
 * the node is no longer routed to until its next signed call (reconnecting is one:
 * `markNodeUnreachable`), and its direct work's leases end within `config.channelLossGraceMs`
 * (`shortenDirectLeases`), so the sweep marks the work `lost` and each owner moves on, unless
 * the node reconnects (to any instance) and heartbeats it first. Nothing is done when the store
 * has heard from the node since a second after this channel last did (`heardAt`, epoch ms): it is
 * alive elsewhere (a half-open channel noticed late by the pings). Work whose opening this
 * instance's writer still holds is shortened once that commits. Jobs keep their leases: a batch
 * job is worth waiting 30 s for. Returns how many leases were shortened, undefined when nothing
 * was done.
 *
 * @example
 * socket.on('close', () => void channelLost(ctx, node.id, lastMessageAt));
 */
export async function channelLost(ctx: ServiceContext, nodeId: string, heardAt: number): Promise<number | undefined> {
  const queued = ctx.writer.pending > 0;
  if (!(await takeForGone(ctx, nodeId, (Date.now() - heardAt) / 1000 - 1))) return undefined;
  const grace = ctx.config.channelLossGraceMs / 1000;
  let shortened = await shortenDirectLeases(ctx.db, nodeId, grace);
  if (queued) {
    await ctx.writer.settled();
    shortened += await shortenDirectLeases(ctx.db, nodeId, grace);
  }
  return shortened;
}

/**
 * A node hung up its long-poll at `hungUpAt` (epoch ms) and the store has recorded no signed call
 * of it since (`watchPollHangUps` clears this process's once-a-second throttle of those records at
 * the hang-up, so a call here after it is always recorded): the node is taken for gone, as a
 * killed process's poll is. It is no longer routed to until its next signed call, and the direct
 * work leased to it that it never took (`dispatched_at` NULL: leased to it while it was not
 * polling) ends its lease within `config.channelLossGraceMs`, so each owner moves on.
 * Work the node took keeps its lease: a node that stopped polling (shutting down) may still run it
 * and deliver over HTTP. Returns how many leases were shortened, undefined when nothing was done.
 *
 * @example
 * setTimeout(() => void pollLost(ctx, node.id, hungUpAt), ctx.config.pollHangUpGraceMs);
 */
export async function pollLost(ctx: ServiceContext, nodeId: string, hungUpAt: number): Promise<number | undefined> {
  if (!(await takeForGone(ctx, nodeId, (Date.now() - hungUpAt) / 1000))) return undefined;
  return shortenDirectLeases(ctx.db, nodeId, ctx.config.channelLossGraceMs / 1000, { untakenOnly: true });
}

/** This instance's watch over long-polls that their node hung up (`watchPollHangUps`). */
export interface PollHangUps {
  /**
   * A poll of the node started here; returns what to call if its connection closes before its
   * answer (the node hung it up). A hang-up is ignored once a later poll of the node started here.
   */
  started(nodeId: string): () => void;
  /** No more watching (the instance is shutting down); resolves once a check under way ended. */
  close(): Promise<void>;
}

/**
 * Watches for nodes that hang up a long-poll and make no signed call within
 * `config.pollHangUpGraceMs` after it (`pollLost`). One timer per node, restarted by each hang-up;
 * none once closed: the polls this instance ends as it shuts down are not nodes lost.
 *
 * A node that hangs up and polls again at once may have its new poll read before the old one's
 * close: its new call came before the hang-up as this process sees it, and, within a second of
 * the old poll's, was not recorded (`node-auth.ts` throttles those records). So a hang-up counts
 * only while no later poll of the node started here, and the check is dropped when one starts
 * before it. This keeps the number of the latest poll started here for every node that polled.
 *
 * @example
 * const hangUps = watchPollHangUps(ctx);
 * const hungUp = hangUps.started(node.id);
 * reply.raw.once('close', () => { if (!reply.raw.writableFinished) hungUp(); });
 */
export function watchPollHangUps(ctx: ServiceContext, graceMs = ctx.config.pollHangUpGraceMs): PollHangUps {
  const timers = new Map<string, NodeJS.Timeout>();
  const checking = new Set<Promise<void>>();
  const latestPoll = new Map<string, number>();
  let polls = 0;
  let closed = false;
  const check = (nodeId: string, hungUpAt: number, poll: number) => {
    timers.delete(nodeId);
    if (latestPoll.get(nodeId) !== poll) return;
    const done = pollLost(ctx, nodeId, hungUpAt).then(
      (shortened) => {
        if (shortened !== undefined)
          ctx.log.warn(
            { node_id: nodeId, work: shortened },
            'node hung up its long-poll and made no call since: not routed to until its next call; the work it never took fails over',
          );
      },
      (err: unknown) => ctx.log.error({ err, node_id: nodeId }, 'could not mark a node that hung up its long-poll'),
    );
    checking.add(done);
    void done.finally(() => checking.delete(done));
  };
  const hungUp = (nodeId: string, poll: number) => {
    if (closed || latestPoll.get(nodeId) !== poll) return;
    const hungUpAt = Date.now();
    forgetTouch(nodeId);
    clearTimeout(timers.get(nodeId));
    const timer = setTimeout(() => check(nodeId, hungUpAt, poll), graceMs);
    timer.unref();
    timers.set(nodeId, timer);
  };
  return {
    started(nodeId) {
      const poll = ++polls;
      latestPoll.set(nodeId, poll);
      return () => hungUp(nodeId, poll);
    },
    async close() {
      closed = true;
      for (const timer of timers.values()) clearTimeout(timer);
      timers.clear();
      await Promise.all(checking);
    },
  };
}

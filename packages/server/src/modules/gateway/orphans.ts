import type { ServiceContext } from '../../service-context.js';
import { failedWorkAmong } from '../work/store.js';
import { endRequest } from './settle.js';
import { runningRequests } from './store.js';

/**
 * How long a request may stay running after its attempt failed before it counts as abandoned. A
 * live follow loop, on whichever instance, hears of the failure at once (the bus's `work`
 * message, else its once-a-second look) and fails over or ends the request within milliseconds:
 * one still on its failed attempt seconds later has no follow loop left (its instance died).
 */
export const ABANDONED_AFTER_SECONDS = 3;

/**
 * Ends the requests whose follow loop died with its instance (kill -9, a crash) once their
 * attempt failed without a result: the node reported the failure (a stream whose events could not
 * reach the dead instance), or the lease lapsed and the node's next heartbeat no longer listed the
 * work (it holds no receipt for it: work/store.ts `failUnlistedLapsed`). Each is `failed` and
 * charged nothing, its hold released: the buyer's `held_cents` comes back within the lease
 * (SVC_LEASE_SECONDS), a heartbeat and {@link ABANDONED_AFTER_SECONDS}, not the gateway timeout
 * plus a minute. Never a request whose node may still hold its receipt: a lapsed attempt its node
 * lists stays `lost`, and its receipt, when it comes, completes the request. A request this
 * process follows is left to its loop. Safe on several instances at once (each request is ended
 * once, and only while it is still on the failed attempt). Returns how many it ended.
 *
 * @example
 * setInterval(() => void sweepAbandonedRequests(ctx), 1_000);
 */
export async function sweepAbandonedRequests(ctx: ServiceContext): Promise<number> {
  const running = (await runningRequests(ctx.db, ABANDONED_AFTER_SECONDS, 200)).filter(
    (r): r is { id: string; work_id: string } => r.work_id !== null && !ctx.hub.attempts.runningWork(r.work_id),
  );
  const failed = new Set(
    await failedWorkAmong(
      ctx.db,
      running.map((r) => r.work_id),
      ABANDONED_AFTER_SECONDS,
    ),
  );
  let count = 0;
  for (const request of running) {
    if (!failed.has(request.work_id)) continue;
    const charged = await endRequest(ctx, request.id, {
      status: 'failed',
      error: 'abandoned: its attempt failed after the instance following it stopped',
      onWork: request.work_id,
    });
    if (charged !== undefined) count++;
  }
  if (count > 0) ctx.log.warn({ requests: count }, 'gateway: ended requests abandoned by a stopped instance');
  return count;
}

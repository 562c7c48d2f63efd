import type { ServiceContext } from '../../service-context.js';
import { expireLapsedAttestations } from '../attestation/service.js';
import { sendDueWebhooks } from '../jobs/delivery.js';
import { unmetConstraint } from '../jobs/matching.js';
import { findJobById } from '../jobs/store.js';
import { forgetOldSignatures, type NodeRow } from '../nodes/store.js';
import { sweepExpiredLeases } from '../work/leases.js';
import type { SignalledJobs } from '../work/waiters.js';
import { assignSignalledJob, matchJob } from './service.js';

/**
 * The scheduler's side of the poll waiters (work/waiters.ts): a job message names a job; while it
 * is pending, a waiting node passes the matching rules, and it is assigned to that node in memory.
 */
export function signalledJobs(ctx: ServiceContext): SignalledJobs {
  return {
    async find(db, jobId) {
      const job = await findJobById(db, jobId);
      if (!job) return undefined;
      if (job.status !== 'pending') return 'not-pending';
      return {
        accepts: (node) => unmetConstraint(matchJob(job), node) === undefined,
        dispatch: (node, handoff) => assignSignalledJob(ctx, job.id, node as NodeRow, handoff),
      };
    },
  };
}

/**
 * Installs the in-memory dispatch of signalled jobs (`JobSignal.dispatchWith`), and runs the
 * periodic work of every instance: expire leases (every second), send due webhooks (every
 * second), forget old request signatures (every minute). Each tick is safe to run on several
 * instances at once. Returns a function that stops them and waits for a running tick. With
 * `periodic: false` only the dispatch is installed: a test that runs the sweeps itself asserts on
 * its own sweep, not on whichever of two sweeps took the rows first.
 */
export function startBackgroundTasks(
  ctx: ServiceContext,
  options: { intervalMs?: number; periodic?: boolean } = {},
): () => Promise<void> {
  ctx.jobSignal.dispatchWith(signalledJobs(ctx));
  if (options.periodic === false) return async () => undefined;
  const interval = options.intervalMs ?? 1000;
  let running: Promise<void> = Promise.resolve();
  let ticks = 0;
  let stopped = false;
  const tick = async () => {
    ticks++;
    await sweepExpiredLeases(ctx);
    await sendDueWebhooks(ctx);
    if (ticks % 60 === 0) await forgetOldSignatures(ctx.db);
    if (ticks % 60 === 30) await expireLapsedAttestations(ctx);
  };
  const timer = setInterval(() => {
    if (stopped) return;
    running = running.then(tick).catch((err: unknown) => ctx.log.error({ err }, 'background task failed'));
  }, interval);
  timer.unref();
  return async () => {
    stopped = true;
    clearInterval(timer);
    await running;
  };
}

import type { ServiceContext } from '../../service-context.js';
import { completionOf } from './completion.js';
import { lockExpiredWork, setWorkStatus } from './store.js';

/**
 * Handles expired leases: the work is `lost`, and its owner decides what follows (a job goes back
 * to `pending`, or `failed` releasing its hold after the third attempt: `jobs/completion.ts`; the
 * owner of direct work, which follows it, moves on). Safe to run on every instance at once.
 */
export async function sweepExpiredLeases(ctx: ServiceContext): Promise<number> {
  const { lost, requeued } = await ctx.db.transaction(async (tx) => {
    const expired = await lockExpiredWork(tx, 100);
    const back: string[] = [];
    for (const work of expired) {
      await setWorkStatus(tx, work.id, 'lost');
      if (await completionOf(ctx.completions, work).lost(ctx, tx, work)) back.push(work.job_id);
    }
    return { lost: expired.map((w) => w.id), requeued: back };
  });
  // Whoever follows the work (the owner of direct work, about to move on) reads it again now, not at
  // its next once-a-second look.
  for (const workId of lost) await ctx.bus.publish('work', workId);
  // One message per job, like a submission's: each instance offers it to one eligible waiting node
  // rather than waking every waiting node to claim.
  for (const jobId of requeued) await ctx.bus.publish('jobs', jobId);
  return requeued.length;
}

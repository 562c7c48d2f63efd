import type { ServiceContext } from '../src/service-context.js';
import { closeRun, closeRuns, openAndCloseRuns, openRun } from '../src/modules/evidence/recorder.js';
import { newId } from '../src/platform/ids.js';

const run = (orgId: string, subject: string) => ({
  org_id: orgId,
  buyer_id: null,
  subject_type: 'job' as const,
  job_id: subject,
  summary: 'log test',
  jurisdiction: null,
  policy_id: 'pol_test',
  trust_tier: 'standard',
  work_type: 'inference',
});
const opening = [{ type: 'job.submitted', summary: 'submitted' }];
const closing = [{ type: 'job.completed', summary: 'completed', causedBy: ['job.submitted'] }];

/**
 * Closes `count` evidence runs of `orgId` through every path the evidence store signs by (a run
 * closed on its own, a batch closed together as a writer flush does, a batch opened and closed in
 * one statement), so that a log test sees the leaves each of them enters. Returns the subjects.
 *
 * @example
 * const subjects = await closeTestRuns(t.ctx, buyer.orgId, 9);
 */
export async function closeTestRuns(ctx: ServiceContext, orgId: string, count: number): Promise<string[]> {
  const subjects = Array.from({ length: count }, () => newId('job'));
  const third = Math.ceil(count / 3);
  const single = subjects.slice(0, third);
  const batched = subjects.slice(third, 2 * third);
  const together = subjects.slice(2 * third);
  for (const s of single)
    await ctx.db.transaction(async (tx) => {
      await openRun(tx, run(orgId, s), opening);
      await closeRun(tx, ctx.secrets, s, closing, 'done');
    });
  await ctx.db.transaction(async (tx) => {
    for (const s of batched) await openRun(tx, run(orgId, s), opening);
    await closeRuns(
      tx,
      ctx.secrets,
      batched.map((subjectId) => ({ subjectId, events: closing, summary: 'done' })),
    );
  });
  await ctx.db.transaction((tx) =>
    openAndCloseRuns(
      tx,
      ctx.secrets,
      together.map((s) => ({ run: run(orgId, s), events: opening, closing, summary: 'done' })),
    ),
  );
  return subjects;
}

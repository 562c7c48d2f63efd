import { findJobKind } from '@svc/protocol';
import type { Queryable } from '../../platform/db/index.js';
import type { PlatformSecrets } from '../../platform/secrets.js';
import { ledgerHeld, ledgerReleased, policyEvaluated, policyId } from '../evidence/events.js';
import { closeRun, openRun, type EvidenceEvent } from '../evidence/recorder.js';
import { findJob, type JobRow } from './store.js';
import { jobView, policyNote } from './view.js';

/** The constraints the scheduler applies to a job: the run's policy snapshot. */
export function jobPolicy(
  job: Pick<JobRow, 'kind' | 'execution_pool' | 'spec' | 'max_price_micro_per_unit'>,
): Record<string, unknown> {
  const s = job.spec;
  return {
    execution_pool: job.execution_pool,
    strict_jurisdiction: s.strict_jurisdiction,
    region: s.region,
    requires_tee: s.requires_tee || job.execution_pool === 'sovereign',
    green_only: s.green_only,
    min_reputation: s.min_reputation,
    required_capabilities: s.required_capabilities,
    model: s.model,
    max_price_micro_per_unit: job.max_price_micro_per_unit,
  };
}

/**
 * Opens a new job's evidence run: submitted, policy evaluated, budget held, then `then` (the
 * routing events of a job assigned as it was queued), all in one statement.
 */
export async function openJobRun(tx: Queryable, job: JobRow, then: readonly EvidenceEvent[] = []): Promise<void> {
  const kind = findJobKind(job.kind)?.name ?? `kind ${job.kind}`;
  const policy = jobPolicy(job);
  await openRun(
    tx,
    {
      org_id: job.org_id,
      buyer_id: job.buyer_id,
      subject_type: 'job',
      job_id: job.id,
      summary: `${kind} job, open`,
      jurisdiction: job.spec.strict_jurisdiction ?? job.spec.region,
      policy_id: policyId(policy),
      trust_tier: job.execution_pool,
      work_type: kind,
    },
    [
      {
        type: 'job.submitted',
        summary: `${kind} job submitted by ${job.buyer_id} with a budget of ${job.budget_cents} cents`,
        metadata: {
          kind: job.kind,
          job_type: kind,
          model: job.spec.model,
          budget_cents: job.budget_cents,
          estimated_cost_micro: job.estimated_cost_micro,
          estimated_units: job.spec.estimated_units,
          inputs: job.spec.inputs?.length ?? null,
          delivery_mode: job.spec.delivery_mode,
        },
      },
      policyEvaluated(policy, policyNote(job)),
      ...(job.hold_id ? [ledgerHeld(job.hold_id, job.budget_cents, 'job.submitted')] : []),
      ...then,
    ],
  );
}

/** Ends a job's run with its closing events and signs it. */
export async function closeJobRun(
  tx: Queryable,
  secrets: PlatformSecrets,
  job: Pick<JobRow, 'id' | 'kind'>,
  status: string,
  events: readonly EvidenceEvent[],
): Promise<void> {
  await closeRun(tx, secrets, job.id, events, `${findJobKind(job.kind)?.name ?? 'job'} job, ${status}`);
}

/** The closing events of a job that ends without a result: the end itself, then its hold released. */
export function endedWithoutResult(
  job: Pick<JobRow, 'hold_id' | 'budget_cents'>,
  type: 'job.failed' | 'job.cancelled',
  summary: string,
  metadata: Record<string, unknown>,
): EvidenceEvent[] {
  return [{ type, summary, metadata }, ...(job.hold_id ? [ledgerReleased(job.hold_id, job.budget_cents, type)] : [])];
}

/**
 * A job as its evidence bundle shows it (the `job` part of evidence's `EvidenceSubjects`,
 * registered in context.ts): its view, or undefined when the organization has no such job.
 *
 * @example
 * const view = await jobEvidenceSubject(ctx.db, principal.orgId, jobId);
 */
export async function jobEvidenceSubject(
  db: Queryable,
  orgId: string,
  jobId: string,
): Promise<Record<string, unknown> | undefined> {
  const job = await findJob(db, orgId, jobId);
  return job ? jobView(job) : undefined;
}

import { executionPool, findJobKind, MICRO_PER_CAD, microToCents, centsToCad, microToCad } from '@svc/protocol';
import type { JobRow } from './store.js';

const iso = (d: Date | null) => (d ? d.toISOString() : null);

/** One sentence saying which policy the scheduler applies to the job. */
export function policyNote(job: Pick<JobRow, 'kind' | 'execution_pool' | 'spec' | 'max_price_micro_per_unit'>): string {
  const parts = [`${job.execution_pool} pool`];
  if (job.spec.strict_jurisdiction) parts.push(`only nodes in ${job.spec.strict_jurisdiction}`);
  if (job.spec.region) parts.push(`region ${job.spec.region}`);
  if (job.spec.requires_tee || job.execution_pool === 'sovereign') parts.push('attested TEE nodes only');
  if (job.spec.green_only) parts.push('green nodes only');
  if (job.spec.min_reputation !== null) parts.push(`reputation >= ${job.spec.min_reputation}`);
  if (job.spec.required_capabilities.length) parts.push(`capabilities ${job.spec.required_capabilities.join(', ')}`);
  const unit = findJobKind(job.kind)?.unit ?? 'unit';
  parts.push(`at most ${(job.max_price_micro_per_unit / MICRO_PER_CAD).toPrecision(3)} CAD per ${unit}`);
  return parts.join('; ');
}

/** The Job resource as the API returns it. */
export function jobView(job: JobRow, meteredUnits?: number | null) {
  const kind = findJobKind(job.kind);
  const deliveryTarget =
    job.spec.delivery_mode === 'put' && job.spec.delivery_artifact_put_url
      ? new URL(job.spec.delivery_artifact_put_url).origin + new URL(job.spec.delivery_artifact_put_url).pathname
      : `/api/v1/marketplace/jobs/${job.id}/result`;
  return {
    id: job.id,
    kind: job.kind,
    job_type: kind?.name ?? 'unknown',
    status: job.status,
    model: job.spec.model,
    budget: centsToCad(job.budget_cents),
    budget_cents: job.budget_cents,
    compute_units: meteredUnits ?? job.spec.estimated_units,
    estimated_cost: microToCad(job.estimated_cost_micro),
    estimated_cost_cents: microToCents(job.estimated_cost_micro),
    max_price_per_unit: job.max_price_micro_per_unit / MICRO_PER_CAD,
    max_price_per_unit_cents: Math.round(job.max_price_micro_per_unit / 10_000),
    execution_pool: job.execution_pool ?? executionPool({ kind: job.kind, requires_tee: job.spec.requires_tee }),
    required_region: job.spec.region ?? '',
    strict_jurisdiction: job.spec.strict_jurisdiction ?? '',
    delivery_mode: job.spec.delivery_mode,
    delivery_target: deliveryTarget,
    ...(job.spec.delivery_artifact_put_url ? { delivery_artifact_put_url: job.spec.delivery_artifact_put_url } : {}),
    ...(job.spec.delivery_manifest_put_url ? { delivery_manifest_put_url: job.spec.delivery_manifest_put_url } : {}),
    policy_note: policyNote(job),
    attempts: job.attempts,
    node_id: job.node_id,
    charged_cents: job.charged_cents,
    charged_micro: job.charged_micro,
    charged: job.charged_micro === null ? null : microToCad(job.charged_micro),
    result_hash: job.result_hash,
    failure_reason: job.failure_reason,
    created_at: job.created_at.toISOString(),
    submitted_at: job.submitted_at.toISOString(),
    assigned_at: iso(job.assigned_at),
    completed_at: iso(job.completed_at),
  };
}

import { Type } from '@sinclair/typebox';
import { CreditTransactionSchema } from './billing.js';
import { DateTime, Nullable, OpenObject, StringEnum } from './common.js';
import { JOB_STATUSES } from './job-statuses.js';

/** A job's status as the API shows it. */
export const JobStatusSchema = StringEnum(JOB_STATUSES);

/** A job as `GET /api/v1/marketplace/jobs` lists it. */
export const MarketplaceJobSchema = Type.Object(
  {
    id: Type.String(),
    kind: Type.Integer(),
    job_type: Type.String(),
    status: JobStatusSchema,
    model: Nullable(Type.String()),
    budget: Type.Number(),
    budget_cents: Type.Integer(),
    compute_units: Type.Number({ description: 'estimated units, or metered units once completed' }),
    estimated_cost: Type.Number(),
    estimated_cost_cents: Type.Integer(),
    max_price_per_unit: Type.Number(),
    max_price_per_unit_cents: Type.Integer(),
    execution_pool: StringEnum(['public', 'sovereign'] as const),
    required_region: Type.String(),
    strict_jurisdiction: Type.String(),
    delivery_mode: Type.String(),
    delivery_target: Type.String(),
    delivery_artifact_put_url: Type.Optional(Type.String()),
    delivery_manifest_put_url: Type.Optional(Type.String()),
    policy_note: Type.String(),
    attempts: Type.Integer(),
    node_id: Nullable(Type.String()),
    charged_cents: Nullable(Type.Integer(), { description: 'whole cents moved (after the sub-cent carry; may be 0)' }),
    charged_micro: Nullable(Type.Integer(), { description: 'the exact charge in micro-CAD' }),
    charged: Nullable(Type.Number(), { description: 'the exact charge in CAD' }),
    result_hash: Nullable(Type.String()),
    failure_reason: Nullable(Type.String()),
    created_at: DateTime,
    submitted_at: DateTime,
    assigned_at: Nullable(DateTime),
    completed_at: Nullable(DateTime),
  },
  { $id: 'MarketplaceJob' },
);

export const JobListResponseSchema = Type.Object(
  {
    jobs: Type.Array(Type.Ref(MarketplaceJobSchema)),
    total: Type.Integer(),
    limit: Type.Integer(),
    offset: Type.Integer(),
  },
  { $id: 'JobListResponse' },
);

/** The answer to `GET /api/v1/marketplace/jobs/:id/audit`. */
export const AuditResponseSchema = Type.Object(
  {
    job_id: Type.String(),
    buyer_id: Type.String(),
    status: Type.String(),
    created_at: DateTime,
    assigned_at: Nullable(DateTime),
    completed_at: Nullable(DateTime),
    audit_generated: DateTime,
    receipts_count: Type.Integer(),
    // The ledger rows' own shape, inlined: a `$ref` here would make the jobs routes depend on billing's registration.
    credit_ledger: Type.Array(Type.Object(CreditTransactionSchema.properties)),
    events: Type.Array(Type.Object({ at: DateTime, type: Type.String(), details: OpenObject() })),
  },
  { $id: 'MarketplaceAuditResponse' },
);

const SlaCounter = Type.Integer({ minimum: 0 });

/** The answer to `GET /api/v1/marketplace/sla` (the spec's MarketplaceSLAResponse). */
export const MarketplaceSLAResponseSchema = Type.Object(
  {
    window_hours: Type.Integer(),
    window_since: DateTime,
    generated_at: DateTime,
    totals: Type.Record(Type.String(), SlaCounter, {
      description:
        'jobs per status in the window: submitted (all), pending, assigned, running, completed, failed, cancelled, finished (the last three)',
    }),
    assignment: Type.Object({
      samples: SlaCounter,
      p50_latency_ms: Type.Number(),
      p95_latency_ms: Type.Number(),
      target_p95_ms: Type.Number(),
      meets_target: Type.Boolean(),
      insufficient_sample: Type.Boolean(),
    }),
    completion: Type.Object({
      in_flight_jobs: SlaCounter,
      terminal_jobs_considered: SlaCounter,
      success_rate: Type.Number(),
      target_success_rate: Type.Number(),
      meets_target: Type.Boolean(),
      insufficient_sample: Type.Boolean(),
    }),
  },
  { $id: 'MarketplaceSLAResponse' },
);

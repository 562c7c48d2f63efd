import { Type } from '@sinclair/typebox';
import { StringEnum } from '../../platform/schemas.js';
import {
  AuditResponseSchema,
  JOB_STATUSES,
  JobListResponseSchema,
  MarketplaceJobSchema,
  MarketplaceSLAResponseSchema,
} from '@svc/protocol/rest';

/** Shapes the dashboard reads too: defined once in `@svc/protocol/rest`, named here as the routes use them. */
export const MarketplaceJob = MarketplaceJobSchema;
export const JobListResponse = JobListResponseSchema;
export const AuditResponse = AuditResponseSchema;
export const MarketplaceSLAResponse = MarketplaceSLAResponseSchema;

const Quantity = Type.Integer({ minimum: 0, maximum: 2 ** 53 - 1 });
const Url = Type.String({ format: 'uri', maxLength: 2048 });

const estimates = {
  estimated_data_gb: Type.Optional(Quantity),
  estimated_duration_ms: Type.Optional(Quantity),
  estimated_gpu_seconds: Type.Optional(Quantity),
  estimated_images: Type.Optional(Quantity),
  estimated_runs: Type.Optional(Quantity),
  estimated_scenes: Type.Optional(Quantity),
  estimated_tokens: Type.Optional(Quantity),
};

export const EstimateRequest = Type.Object(
  {
    kind: Type.Integer({ minimum: 1, maximum: 10, description: 'job kind 1-10 (see GET /api/v1/marketplace/pricing)' }),
    ...estimates,
    inline_text: Type.Optional(
      Type.String({
        maxLength: 512 * 1024,
        description: 'kinds 1, 2, 4: the inputs, counted as a submission counts them',
      }),
    ),
    payload_url: Type.Optional(
      Type.String({
        format: 'uri',
        maxLength: 2048,
        description: 'kinds 1, 2, 4: the inputs document; kind 3: the audio, measured by the server',
      }),
    ),
    strict_jurisdiction: Type.Optional(Type.String({ pattern: '^[A-Z]{2}$' })),
    region: Type.Optional(Type.String({ pattern: '^[a-z0-9-]{1,64}$' })),
  },
  { $id: 'EstimateRequest', additionalProperties: false },
);

export const EstimateResponse = Type.Object(
  {
    kind: Type.Integer(),
    unit: Type.String(),
    units: Type.Integer(),
    min_cost: Type.Number(),
    max_cost: Type.Number(),
    recommended_budget: Type.Number(),
    min_cost_cents: Type.Integer(),
    max_cost_cents: Type.Integer(),
    recommended_cents: Type.Integer(),
    currency: Type.Literal('CAD'),
  },
  { $id: 'EstimateResponse' },
);

export const CreateJobRequest = Type.Object(
  {
    kind: Type.Integer({ minimum: 1, maximum: 10 }),
    budget: Type.Number({
      minimum: 0.01,
      maximum: 1_000_000,
      description: 'CAD held at submission; the job never costs more',
    }),
    max_price_per_unit: Type.Number({
      minimum: 0.000000001,
      maximum: 1_000,
      description: "CAD per metering unit; nodes asking more don't match",
    }),
    currency: Type.String({ description: 'must be `CAD`' }),
    model: Type.Optional(
      Type.String({ maxLength: 64, description: 'catalogue model for kinds 1-4 (default per kind)' }),
    ),
    region: Type.Optional(Type.String({ pattern: '^[a-z0-9-]{1,64}$' })),
    strict_jurisdiction: Type.Optional(
      Type.String({ pattern: '^[A-Z]{2}$', description: 'ISO 3166-1 alpha-2; only nodes in this country' }),
    ),
    delivery_mode: Type.Optional(StringEnum(['inline', 'put'] as const, { default: 'inline' })),
    inline_text: Type.Optional(Type.String({ maxLength: 512 * 1024 })),
    output_file: Type.Optional(Type.String({ maxLength: 255, pattern: '^[A-Za-z0-9._-]+$' })),
    payload_url: Type.Optional(Url),
    delivery_artifact_put_url: Type.Optional(Url),
    delivery_manifest_put_url: Type.Optional(Url),
    delivery_webhook_url: Type.Optional(Url),
    min_reputation: Type.Optional(Type.Integer({ minimum: 0, maximum: 100 })),
    ...estimates,
    green_only: Type.Optional(Type.Boolean()),
    requires_tee: Type.Optional(Type.Boolean()),
    required_capabilities: Type.Optional(Type.Array(Type.String({ maxLength: 64 }), { maxItems: 32 })),
    runner_args: Type.Optional(Type.Array(Type.String({ maxLength: 4096 }), { minItems: 1, maxItems: 256 })),
    timeout_seconds: Type.Optional(Type.Integer({ minimum: 1, maximum: 3600 })),
    image: Type.Optional(
      Type.String({
        pattern: '^[a-z0-9][a-z0-9._/:@-]{0,159}$',
        description:
          "kinds 5-7: the container image runner_args runs in (a node holding it takes the job); else the node's default",
      }),
    ),
    memory_mb: Type.Optional(
      Type.Integer({
        minimum: 6,
        maximum: 1_048_576,
        description: "kinds 5-7: the container's memory limit (within the node's)",
      }),
    ),
    cpus: Type.Optional(
      Type.Number({ minimum: 0.01, maximum: 1024, description: "kinds 5-7: the container's CPU limit" }),
    ),
    pids: Type.Optional(
      Type.Integer({ minimum: 8, maximum: 4096, description: "kinds 5-7: the container's process limit" }),
    ),
    network: Type.Optional(
      StringEnum(['none', 'egress'] as const, {
        default: 'none',
        description:
          "kinds 5-8 and 10: 'egress' gives the container a network (user-mode NAT, not the node's loopback); only a node whose operator allows it (--allow-job-network) takes the job",
      }),
    ),
    capture_set_id: Type.Optional(
      Type.String({
        pattern: '^cs_[a-z0-9]{26}$',
        description: 'kinds 8 and 10: the ready capture set to process (it moves to processing)',
      }),
    ),
  },
  { $id: 'CreateJobRequest', additionalProperties: false },
);

export const CreateJobResponse = Type.Object(
  {
    job_id: Type.String(),
    estimated_cost: Type.Number(),
    estimated_duration_ms: Type.Integer(),
    status: Type.String(),
  },
  { $id: 'CreateJobResponse' },
);

export const JobListQuery = Type.Object({
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
  offset: Type.Optional(Type.Integer({ minimum: 0, default: 0 })),
  status: Type.Optional(StringEnum(JOB_STATUSES)),
});

export const JobIdParams = Type.Object({ id: Type.String({ pattern: '^job_[a-z0-9]{26}$' }) });

import { Type } from '@sinclair/typebox';
import { StringEnum } from '../../platform/schemas.js';
import { POLICY_PRESETS, TRUST_TIERS } from './policy.js';
import { WORK_ORDER_STATUSES } from './states.js';

const Str = Type.String();
const NullableStr = Type.Union([Type.String(), Type.Null()]);
const Url = Type.String({ format: 'uri', maxLength: 2048 });
/** A git branch name: no `..`, no leading or trailing slash, no spaces or control characters. */
const Branch = Type.String({
  pattern: '^(?!.*\\.\\.)(?!/)(?!.*/$)(?!-)[A-Za-z0-9._/-]{1,200}$',
  description: 'a git branch name',
});
const Glob = Type.String({ minLength: 1, maxLength: 300 });
const Globs = Type.Array(Glob, { maxItems: 100 });
const Country = Type.String({ pattern: '^[A-Z]{2}$' });

export const IdParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 100 }) });

export const CreateWorkRepositoryRequest = Type.Object(
  {
    repository_url: Url,
    default_branch: Type.Optional(Branch),
    label: Type.Optional(Type.String({ maxLength: 200 })),
    repo_host_token: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 1000,
        description: 'stored encrypted (AES-256-GCM) for pushes and pull requests; never returned',
      }),
    ),
  },
  { $id: 'CreateWorkRepositoryRequest', additionalProperties: false },
);

export const WorkRepositoryConnection = Type.Object(
  {
    id: Str,
    repository_url: Str,
    default_branch: Str,
    label: NullableStr,
    has_token: Type.Boolean(),
    token_key_id: NullableStr,
    created_at: Str,
    last_preflight_at: NullableStr,
    last_preflight_status: NullableStr,
    last_preflight_job_id: NullableStr,
  },
  { $id: 'WorkRepositoryConnection' },
);

export const WorkRepositoryList = Type.Object({
  repositories: Type.Array(Type.Ref('WorkRepositoryConnection')),
  total: Type.Integer(),
});

export const PreflightWorkRepositoryRequest = Type.Object(
  {
    base_branch: Type.Optional(Branch),
    jurisdiction: Type.Optional(Country),
    requires_tee: Type.Optional(Type.Boolean()),
    timeout_seconds: Type.Optional(Type.Integer({ minimum: 1, maximum: 3600, default: 900 })),
    tooling: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 100 }), { maxItems: 50 })),
  },
  { $id: 'PreflightWorkRepositoryRequest', additionalProperties: false },
);

export const PreflightWorkRepositoryResponse = Type.Object(
  {
    status: StringEnum(['ready', 'blocked', 'failed']),
    next_action: Str,
    job_id: NullableStr,
    evidence_path: NullableStr,
    base_branch: Str,
    base_commit: NullableStr,
    tooling: Type.Union([Type.Object({}, { additionalProperties: true }), Type.Null()]),
    missing: Type.Array(Str),
    repository: Type.Ref('WorkRepositoryConnection'),
  },
  { $id: 'PreflightWorkRepositoryResponse' },
);

export const CreateWorkOrderRequest = Type.Object(
  {
    goal: Type.String({ minLength: 1, maxLength: 20_000 }),
    title: Type.Optional(Type.String({ maxLength: 200 })),
    architecture_plan: Type.Optional(Type.String({ maxLength: 50_000 })),
    jurisdiction: Type.Optional(Country),
    repository_url: Type.Optional(Url),
    repository_connection_id: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    site_url: Type.Optional(Url),
    work_branch: Type.Optional(Branch),
    base_branch: Type.Optional(Branch),
    trust_tier: Type.Optional(
      StringEnum(TRUST_TIERS, {
        description:
          'default `certified` for owners and admins, `reviewed` for members (a member may not choose `certified`: 403)',
      }),
    ),
    allowed_paths: Type.Optional(Globs),
    forbidden_paths: Type.Optional(Globs),
    required_checks: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 200 }), { maxItems: 50 })),
    policy_preset: Type.Optional(StringEnum(POLICY_PRESETS, { default: 'custom' })),
    model: Type.Optional(
      Type.String({ minLength: 1, maxLength: 100, description: 'the chat model the capsule asks (a catalogue id)' }),
    ),
    requires_tee: Type.Optional(Type.Boolean()),
    timeout_seconds: Type.Optional(Type.Integer({ minimum: 1, maximum: 3600, default: 900 })),
  },
  { $id: 'CreateWorkOrderRequest', additionalProperties: false },
);

const Approval = Type.Object({
  decision: StringEnum(['approved', 'rejected']),
  by: Str,
  role: Str,
  reason: NullableStr,
  at: Str,
});
const Check = Type.Object(
  { command: Str, exit_code: Type.Union([Type.Integer(), Type.Null()]), timed_out: Type.Boolean(), output_sha256: Str },
  { additionalProperties: true },
);

export const WorkOrder = Type.Object(
  {
    id: Str,
    status: StringEnum(WORK_ORDER_STATUSES),
    goal: Str,
    title: NullableStr,
    architecture_plan: NullableStr,
    jurisdiction: NullableStr,
    repository_url: Str,
    repository_connection_id: NullableStr,
    site_url: NullableStr,
    base_branch: Str,
    work_branch: Str,
    trust_tier: StringEnum(TRUST_TIERS),
    policy_preset: StringEnum(POLICY_PRESETS),
    allowed_paths: Type.Array(Str),
    forbidden_paths: Type.Array(Str),
    required_checks: Type.Array(Str),
    model: NullableStr,
    decision: Type.Union([Type.Object({}, { additionalProperties: true }), Type.Null()]),
    job_id: NullableStr,
    base_commit: NullableStr,
    commit_sha: NullableStr,
    changed_paths: Type.Array(Str),
    checks: Type.Array(Check),
    approvals: Type.Array(Approval),
    pr_url: NullableStr,
    pr: Type.Union([Type.Object({}, { additionalProperties: true }), Type.Null()]),
    rollback_point: NullableStr,
    rollback: Type.Union([Type.Object({}, { additionalProperties: true }), Type.Null()]),
    failure_reason: NullableStr,
    server_verified: Type.Union([Type.Object({}, { additionalProperties: true }), Type.Null()], {
      description: 'what the server recomputed from the base and work bundles (changed_paths, diff)',
    }),
    node_claim: Type.Union([Type.Object({}, { additionalProperties: true }), Type.Null()], {
      description: 'what the node reported and signed, taken as its claim (checks, its own changed paths)',
    }),
    evidence_path: Str,
    created_at: Str,
    updated_at: Str,
  },
  { $id: 'WorkOrder' },
);

export const WorkOrderList = Type.Object({
  orders: Type.Array(Type.Ref('WorkOrder')),
  total: Type.Integer(),
  limit: Type.Integer(),
  offset: Type.Integer(),
});
export const WorkOrderListQuery = Type.Object({
  status: Type.Optional(StringEnum(WORK_ORDER_STATUSES)),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
  offset: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000, default: 0 })),
});

export const DecisionRequest = Type.Object(
  { reason: Type.Optional(Type.String({ maxLength: 2000 })) },
  { additionalProperties: false },
);

export const WorkOrderDiff = Type.Object({
  id: Str,
  base_commit: NullableStr,
  commit_sha: NullableStr,
  changed_paths: Type.Array(Str),
  diff: Str,
  diff_truncated: Type.Boolean(),
  diff_sha256: NullableStr,
});

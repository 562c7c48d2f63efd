import {
  HeartbeatBodySchema,
  HeartbeatResponseSchema,
  NodeRegisterRequestSchema,
  NodeRegisterResponseSchema,
  WorkItemSchema,
} from '@svc/protocol';
import { Type } from '@sinclair/typebox';

/** The bodies below are the node protocol's, defined once in packages/protocol; here they get their OpenAPI names. */
export const NodeRegisterRequest = Type.Object(NodeRegisterRequestSchema.properties, {
  $id: 'NodeRegisterRequest',
  additionalProperties: false,
});

export const NodeRegisterResponse = Type.Object(NodeRegisterResponseSchema.properties, { $id: 'NodeRegisterResponse' });

/** The body of `POST /api/v1/node/heartbeat` (one shape with the channel's `heartbeat`, in packages/protocol). */
export const HeartbeatRequest = Type.Object(HeartbeatBodySchema.properties, {
  $id: 'HeartbeatRequest',
  additionalProperties: false,
});

export const HeartbeatResponse = Type.Object(HeartbeatResponseSchema.properties, { $id: 'HeartbeatResponse' });

/**
 * The work item of the long-poll (one shape with the channel's `work` message, in
 * packages/protocol); the server always sends an ISO 8601 lease end.
 */
export const WorkItem = Type.Object(
  { ...WorkItemSchema.properties, lease_expires_at: Type.String({ format: 'date-time' }) },
  { $id: 'WorkItem' },
);

/** The answer to `GET /api/v1/node/work`. */
export const WorkList = Type.Object({ work: Type.Array(Type.Ref(WorkItem)) });

export const NodeSummary = Type.Object(
  {
    node_id: Type.String(),
    pubkey: Type.String(),
    name: Type.String(),
    status: Type.String({ description: '`online` when seen in the last 30 s, else `offline`' }),
    availability: Type.String({ description: '`available` or `busy`' }),
    device_class: Type.String(),
    gpu_model: Type.String(),
    gpu_ready: Type.Boolean(),
    managed_oci_gpu_ready: Type.Boolean(),
    cpu_cores: Type.Integer(),
    ram_gb: Type.Number(),
    vram_gb: Type.Number(),
    region: Type.String(),
    country: Type.String(),
    models: Type.Array(Type.String()),
    attestation: Type.String({
      description:
        '`none`, or `<method>:verified` / `<method>:unverified` / `<method>:expired` (re-attestation due: SVC_TEE_REATTEST_HOURS)',
    }),
    reputation: Type.Integer({
      minimum: 0,
      maximum: 100,
      description: '100 at registration; lowered for each receipt refused over its metering bound (docs/receipts.md)',
    }),
    load: Type.Number(),
    last_seen: Type.Integer({ description: 'unix seconds; 0 if never' }),
  },
  { $id: 'NodeSummary' },
);

export const NodeListQuery = Type.Object({
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
  offset: Type.Optional(Type.Integer({ minimum: 0, default: 0 })),
  status: Type.Optional(Type.Union([Type.Literal('online'), Type.Literal('offline')])),
  country: Type.Optional(Type.String({ pattern: '^[A-Z]{2}$' })),
  model: Type.Optional(Type.String({ maxLength: 64 })),
  scope: Type.Optional(
    Type.Union([Type.Literal('mine'), Type.Literal('all')], {
      description: "`mine` (default): your organization's nodes; `all`: every online node (public fields)",
    }),
  ),
});

export const NodeListResponse = Type.Object(
  { nodes: Type.Array(Type.Ref(NodeSummary)), total: Type.Integer() },
  { $id: 'NodeListResponse' },
);

export const NodeEarningsResponse = Type.Object(
  {
    currency: Type.Literal('CAD'),
    total_cents: Type.Integer({ description: "the organization's node earnings, after the platform fee" }),
    payable_cents: Type.Integer({
      description:
        'what payouts may pay now: earnings less the part earned from free-tier credit, less payouts, at most the paid credit available (docs/billing.md)',
    }),
    payable: Type.Number({ description: 'payable_cents in CAD' }),
    non_payable_micro: Type.Integer({
      description: 'earnings from free-tier credit (promotional, never payable), micro-CAD',
    }),
    nodes: Type.Array(
      Type.Object({
        node_id: Type.String(),
        earned_cents: Type.Integer(),
        work_items: Type.Integer({ description: 'paid jobs and gateway requests' }),
      }),
      { description: 'nodes that earned anything, most first' },
    ),
  },
  { $id: 'NodeEarningsResponse' },
);

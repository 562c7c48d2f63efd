import { HeartbeatBodySchema } from '@svc/protocol';
import { Type } from '@sinclair/typebox';

const Hex32 = Type.String({ pattern: '^[0-9a-f]{64}$' });
const Hex64 = Type.String({ pattern: '^[0-9a-f]{128}$' });
const Count = Type.Integer({ minimum: 0, maximum: 2 ** 53 - 1 });

export const NodeRegisterRequest = Type.Object(
  {
    pubkey: Hex32,
    signature: Hex64,
    attestation_method: Type.Optional(Type.Integer({ minimum: 0, maximum: 255 })),
    attestation_evidence: Type.Optional(Type.String({ maxLength: 65536 })),
    bandwidth_mbps: Type.Optional(Count),
    cpu_cores: Type.Optional(Type.Integer({ minimum: 0, maximum: 100_000 })),
    device_type: Type.Optional(Type.String({ maxLength: 64 })),
    geohash_bucket: Type.Optional(Count),
    gpu_model: Type.Optional(Type.String({ maxLength: 128 })),
    ram_bytes: Type.Optional(Count),
    vram_bytes: Type.Optional(Count),
    sensors: Type.Optional(Type.String({ maxLength: 16384, description: 'serialized JSON' })),
    country: Type.Optional(Type.String({ pattern: '^[A-Z]{2}$', description: 'ISO 3166-1 alpha-2' })),
    region: Type.Optional(Type.String({ pattern: '^[a-z0-9-]{1,64}$' })),
    models: Type.Optional(Type.Array(Type.String({ maxLength: 64 }), { maxItems: 64 })),
    capabilities: Type.Optional(Type.Array(Type.String({ pattern: '^[a-z0-9_:-]{1,64}$' }), { maxItems: 64 })),
    max_concurrency: Type.Optional(Type.Integer({ minimum: 1, maximum: 256 })),
    price_micro_per_unit: Type.Optional(
      Type.Record(Type.String({ pattern: '^([1-9]|10)$' }), Type.Number({ minimum: 0, maximum: 1e9 })),
    ),
    green: Type.Optional(Type.Boolean()),
    name: Type.Optional(Type.String({ maxLength: 100 })),
  },
  { $id: 'NodeRegisterRequest', additionalProperties: false },
);

export const NodeRegisterResponse = Type.Object(
  {
    node_id: Type.String(),
    status: Type.String(),
    poll_interval_ms: Type.Integer(),
    server_public_key: Type.String(),
    lease_seconds: Type.Integer({ description: 'heartbeat at least three times per lease' }),
    channel: Type.Optional(Type.String({ description: 'the node channel (a WebSocket) this server offers' })),
  },
  { $id: 'NodeRegisterResponse' },
);

/** The body of `POST /api/v1/node/heartbeat` (one shape with the channel's `heartbeat`, in packages/protocol). */
export const HeartbeatRequest = Type.Object(HeartbeatBodySchema.properties, {
  $id: 'HeartbeatRequest',
  additionalProperties: false,
});

export const HeartbeatResponse = Type.Object(
  { cancel: Type.Array(Type.String()), lease_expires_at: Type.String({ format: 'date-time' }) },
  { $id: 'HeartbeatResponse' },
);

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

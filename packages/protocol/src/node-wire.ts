import { Type, type Static } from '@sinclair/typebox';
import { ChatFieldsSchema } from './chat-fields.js';
import { OpenObject } from './rest/common.js';

/**
 * The node protocol's HTTP bodies that the channel does not carry (docs/node-protocol.md):
 * registration, the heartbeat's answer, the stored receipt, failures, the answer to an events
 * call. The bodies both carry (work items, stream events, results, receipts, heartbeats) are in
 * `channel.ts`. One definition each: the server's route schemas wrap them with their OpenAPI
 * `$id`, the node agent's and the dashboard's types are `Static<>` of them.
 */

const Hex64 = Type.String({ pattern: '^[0-9a-f]{64}$' });
const Hex128 = Type.String({ pattern: '^[0-9a-f]{128}$' });
const Count = Type.Integer({ minimum: 0, maximum: 2 ** 53 - 1 });

export { OpenObject };

/** The body of `POST /api/v1/node/register` (DESIGN.md section 9): `signature` over the rest, by the node key. */
export const NodeRegisterRequestSchema = Type.Object(
  {
    pubkey: Hex64,
    signature: Hex128,
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
    chat_fields: Type.Optional(ChatFieldsSchema),
    capabilities: Type.Optional(Type.Array(Type.String({ pattern: '^[a-z0-9_:./@-]{1,160}$' }), { maxItems: 64 })),
    max_concurrency: Type.Optional(Type.Integer({ minimum: 1, maximum: 256 })),
    price_micro_per_unit: Type.Optional(
      Type.Record(Type.String({ pattern: '^([1-9]|10)$' }), Type.Number({ minimum: 0, maximum: 1e9 })),
    ),
    green: Type.Optional(Type.Boolean()),
    name: Type.Optional(Type.String({ maxLength: 100 })),
  },
  { additionalProperties: false },
);
export type NodeRegisterRequestWire = Static<typeof NodeRegisterRequestSchema>;

/** The answer to a registration. */
export const NodeRegisterResponseSchema = Type.Object({
  node_id: Type.String(),
  status: Type.String(),
  poll_interval_ms: Type.Integer(),
  server_public_key: Type.String(),
  lease_seconds: Type.Integer({ description: 'heartbeat at least three times per lease' }),
  channel: Type.Optional(Type.String({ description: 'the node channel (a WebSocket) this server offers' })),
});
export type NodeRegisterResponseWire = Static<typeof NodeRegisterResponseSchema>;

/** The answer to a heartbeat: the work to stop, and how long the node's leases now run. */
export const HeartbeatResponseSchema = Type.Object({
  cancel: Type.Array(Type.String()),
  lease_expires_at: Type.String({ format: 'date-time' }),
});
export type HeartbeatResponseWire = Static<typeof HeartbeatResponseSchema>;

/** The body of `POST /api/v1/node/work/{work_id}/fail`. */
export const WorkFailRequestSchema = Type.Object(
  { message: Type.String({ minLength: 1, maxLength: 2000 }), retryable: Type.Optional(Type.Boolean()) },
  { additionalProperties: false },
);
export type WorkFailRequestWire = Static<typeof WorkFailRequestSchema>;

/** The answer to `POST /api/v1/node/work/{work_id}/result`. */
export const WorkResultResponseSchema = Type.Object({
  work_id: Type.String(),
  result_hash: Type.String(),
  status: Type.String(),
});
export type WorkResultResponseWire = Static<typeof WorkResultResponseSchema>;

/** The answer to `POST /api/v1/node/work/{work_id}/events`. */
export const EventsResponseSchema = Type.Object({
  accepted: Type.Integer(),
  cancel: Type.Boolean({ description: 'true: the work was cancelled; stop and upload nothing' }),
});
export type EventsResponseWire = Static<typeof EventsResponseSchema>;

/**
 * `metadata` of a receipt, outside the SVC1 signature: what the node says about the run. The
 * schema stays an open object (the server stores whatever a node sends and adds model,
 * jurisdiction and retrieved-chunk provenance); the static type names what the agent writes.
 */
export const ReceiptMetadataSchema = Type.Unsafe<{
  model?: string;
  engine?: string;
  gpu_model?: string;
  country?: string;
  region?: string;
  duration_ms?: number;
  exit_code?: number;
  [field: string]: unknown;
}>(Type.Object({}, { additionalProperties: true }));
export type ReceiptMetadataWire = Static<typeof ReceiptMetadataSchema>;

/** A stored receipt, as every receipts endpoint returns it (DESIGN.md section 9). */
export const StoredReceiptSchema = Type.Object({
  id: Type.String(),
  job_id: Type.String(),
  node_id: Type.String(),
  node_public_key: Type.String(),
  result_hash: Type.String(),
  metering_units: Type.Integer(),
  signature: Type.String(),
  signature_version: Type.String(),
  metadata: OpenObject(),
  created_at: Type.String({ format: 'date-time' }),
});
export type StoredReceipt = Static<typeof StoredReceiptSchema>;

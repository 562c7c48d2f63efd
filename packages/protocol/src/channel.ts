import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { ToolCallDeltaSchema } from './chat-fields.js';
import { OpenObject, ReceiptMetadataSchema, WorkFailRequestSchema } from './node-wire.js';

/**
 * The node channel's wire shapes (docs/node-protocol.md, "The node channel"): one WebSocket per
 * node, JSON text messages, each with a per-connection `seq` that strictly increases in each
 * direction. The HTTP bodies they carry (work items, stream events, results, receipts,
 * heartbeats) are the same as on the HTTP paths; these schemas are their one definition.
 */

/** The TCP socket under a WebSocket, as much of it as corking needs (the `ws` library's `_socket`). */
interface CorkableSocket {
  readonly destroyed: boolean;
  cork(): void;
  uncork(): void;
}

/**
 * One side's frames of one tick in one socket write: the returned function corks the TCP socket
 * under a WebSocket (`ws`'s `_socket`, the batching its maintainers advise) at its first call in a
 * tick and uncorks it on the next tick. Call it before each `send`; frames and order are unchanged.
 *
 * @example
 * const cork = tickCork();
 * cork(ws._socket); ws.send(text);
 */
export function tickCork(): (raw: CorkableSocket | undefined) => void {
  let corked = false;
  return (raw) => {
    if (corked || raw === undefined || raw.destroyed) return;
    corked = true;
    raw.cork();
    process.nextTick(() => {
      corked = false;
      raw.uncork();
    });
  };
}

/** Where a node opens the channel: a signed `GET` (empty body) that upgrades to a WebSocket. */
export const NODE_CHANNEL_PATH = '/api/v1/node/channel';

/** Largest channel message, in bytes: a receipt carries its result inline (as the HTTP route allows). */
export const NODE_CHANNEL_MAX_MESSAGE_BYTES = 96 * 1024 * 1024;

const WorkId = Type.String({ pattern: '^[A-Za-z0-9_:-][A-Za-z0-9._:-]{0,127}$' });
const Seq = Type.Integer({ minimum: 1, maximum: Number.MAX_SAFE_INTEGER });
const Hex64 = Type.String({ pattern: '^[0-9a-f]{64}$' });
const Units = Type.Integer({ minimum: 0, maximum: 2 ** 53 - 1 });

/**
 * What a gateway work item dispatched before its opening committed carries (docs/node-protocol.md,
 * "Work tickets"): the request's opening facts and `mac`, HMAC-SHA256 under a platform secret
 * over the JCS of every other field. The node returns it unchanged with its receipt; a server
 * instance that does not know the work rebuilds the opening from it. Opaque to the node.
 */
export const WorkTicketSchema = Type.Object(
  {
    org_id: Type.String({ maxLength: 64 }),
    buyer_id: Type.String({ maxLength: 64 }),
    request_id: Type.String({ maxLength: 128 }),
    type: Type.String({ maxLength: 32 }),
    model: Type.String({ maxLength: 256 }),
    stream: Type.Boolean(),
    max_cost_micro: Units,
    jurisdiction: Type.Union([Type.String({ maxLength: 64 }), Type.Null()]),
    strict_jurisdiction: Type.Union([Type.String({ maxLength: 64 }), Type.Null()]),
    requires_tee: Type.Boolean(),
    node_id: Type.String({ maxLength: 64 }),
    work_id: Type.String({ maxLength: 128 }),
    issued_at: Type.String({ maxLength: 40 }),
    mac: Hex64,
  },
  { additionalProperties: false },
);
export type WorkTicketWire = Static<typeof WorkTicketSchema>;

/** One item of work, as `GET /api/v1/node/work` answers it and the channel pushes it. */
export const WorkItemSchema = Type.Object({
  work_id: Type.String(),
  job_id: Type.String(),
  type: Type.String({
    description: '`job`, or the gateway request type: `chat`, `embeddings`, `transcription`, `image`',
  }),
  kind: Type.Integer(),
  model: Type.Union([Type.String(), Type.Null()]),
  payload: OpenObject(),
  stream: Type.Boolean(),
  lease_expires_at: Type.String(),
  /** Gateway work sent before its opening committed: return it with the receipt. Jobs have none. */
  ticket: Type.Optional(WorkTicketSchema),
});
export type WorkItemWire = Static<typeof WorkItemSchema>;

/**
 * One event of a streamed work item (one NDJSON line of `POST .../events`). A chat delta may carry
 * tool call fragments (OpenAI's `delta.tool_calls`) besides its text.
 */
export const StreamEventSchema = Type.Union([
  Type.Object({
    type: Type.Literal('delta'),
    content: Type.String(),
    tool_calls: Type.Optional(Type.Array(ToolCallDeltaSchema, { maxItems: 128 })),
  }),
  Type.Object({
    type: Type.Literal('done'),
    usage: Type.Optional(Type.Object({ prompt_tokens: Type.Optional(Units), completion_tokens: Type.Optional(Units) })),
    finish_reason: Type.Optional(Type.String({ maxLength: 64 })),
    result_hash: Type.Optional(Type.String()),
  }),
  Type.Object({
    type: Type.Literal('error'),
    message: Type.String({ maxLength: 2000 }),
    retryable: Type.Optional(Type.Boolean()),
  }),
]);
export type StreamEventWire = Static<typeof StreamEventSchema>;

/** The body of `POST /api/v1/node/work/{work_id}/result`, also carried inline by a receipt. */
export const ResultUploadSchema = Type.Object(
  {
    output: Type.String({ maxLength: 64 * 1024 * 1024 }),
    encoding: Type.Union([Type.Literal('utf8'), Type.Literal('base64')]),
    content_type: Type.Optional(Type.String({ maxLength: 128 })),
    result_hash: Hex64,
    metering_units: Units,
    usage: Type.Optional(OpenObject()),
    exit_code: Type.Optional(Type.Integer()),
  },
  { additionalProperties: false },
);
export type ResultUploadWire = Static<typeof ResultUploadSchema>;

/** The body of `POST /api/v1/node/receipt` (NodeReceiptRequest). */
export const ReceiptUploadSchema = Type.Object(
  {
    job_id: Type.String({ pattern: '^[A-Za-z0-9._:-]{1,256}$' }),
    pubkey: Hex64,
    result_hash: Hex64,
    result_hash_hex: Type.Optional(Hex64),
    signature: Type.String({ pattern: '^[0-9a-f]{128}$' }),
    metering_units: Units,
    green_multiplier_bps: Type.Optional(Type.Integer({ minimum: 0, maximum: 100_000 })),
    metadata: Type.Optional(ReceiptMetadataSchema),
    result: Type.Optional(ResultUploadSchema),
    /** The work item's `ticket`, unchanged. */
    ticket: Type.Optional(WorkTicketSchema),
  },
  { additionalProperties: false },
);
export type ReceiptUploadWire = Static<typeof ReceiptUploadSchema>;

/** The body of `POST /api/v1/node/heartbeat`. */
export const HeartbeatBodySchema = Type.Object(
  {
    load: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
    active_work: Type.Optional(Type.Array(Type.String({ maxLength: 64 }), { maxItems: 256 })),
    models: Type.Optional(Type.Array(Type.String({ maxLength: 64 }), { maxItems: 64 })),
    free_vram_bytes: Type.Optional(Units),
  },
  { additionalProperties: false },
);
export type HeartbeatBodyWire = Static<typeof HeartbeatBodySchema>;

/** The most standing slots a node may hold granted on one channel at once (`grant` messages). */
export const NODE_CHANNEL_MAX_GRANTED = 64;

const nodeMessage = <K extends string, T extends Record<string, TSchema>>(type: K, fields: T) =>
  Type.Object({ type: Type.Literal(type), seq: Seq, ...fields }, { additionalProperties: false });

/**
 * What a node sends. `pull` asks for up to `max` work items (the node's free slots): the server
 * pushes them in one `work` message as soon as work is assigned, and holds the pull until then.
 * `grant` (to a server whose `hello` says `grants: true`) adds `slots` to the node's standing
 * capacity on this channel: the server pushes each work item down the channel as soon as it is
 * assigned, one slot per item, with no pull waiting, and the node grants a slot again when it
 * frees one. Granted slots end with the connection. A grant is answered only when refused.
 * Every other message is answered by one `reply` naming its `seq` (`re`), except a receipt, which
 * is answered by an `ack` once its records are committed (or a failed `reply`).
 */
export const NodeChannelMessageSchema = Type.Union([
  nodeMessage('pull', { max: Type.Integer({ minimum: 1, maximum: 16 }) }),
  nodeMessage('grant', { slots: Type.Integer({ minimum: 1, maximum: NODE_CHANNEL_MAX_GRANTED }) }),
  nodeMessage('heartbeat', { body: HeartbeatBodySchema }),
  nodeMessage('events', { work_id: WorkId, events: Type.Array(StreamEventSchema, { maxItems: 4096 }) }),
  nodeMessage('result', { work_id: WorkId, result: ResultUploadSchema }),
  nodeMessage('receipt', { work_id: WorkId, receipt: ReceiptUploadSchema }),
  nodeMessage('fail', { work_id: WorkId, ...WorkFailRequestSchema.properties }),
]);
export type NodeChannelMessage = Static<typeof NodeChannelMessageSchema>;

/** The error of a failed `reply`: the HTTP route's `{code, error, message}` body. */
export const ChannelErrorSchema = Type.Object({ code: Type.Integer(), error: Type.String(), message: Type.String() });

/**
 * What the server sends. `hello` first (the node's id and lease length; `grants: true` when it
 * takes `grant` messages); `work` answers a `pull`, or, pushed on granted slots, names in `re` the
 * node's latest `grant`;
 * `ack` names work whose receipt is committed (also for a receipt sent again after it was
 * applied); `reply` answers every other node message (`body` is what the HTTP route answers).
 */
export const ServerChannelMessageSchema = Type.Union([
  Type.Object({
    type: Type.Literal('hello'),
    seq: Seq,
    node_id: Type.String(),
    lease_seconds: Type.Integer(),
    grants: Type.Optional(Type.Boolean()),
  }),
  Type.Object({ type: Type.Literal('work'), seq: Seq, re: Seq, work: Type.Array(WorkItemSchema) }),
  Type.Object({ type: Type.Literal('ack'), seq: Seq, re: Type.Optional(Seq), work_ids: Type.Array(Type.String()) }),
  Type.Object({ type: Type.Literal('reply'), seq: Seq, re: Seq, ok: Type.Literal(true), body: Type.Unknown() }),
  Type.Object({ type: Type.Literal('reply'), seq: Seq, re: Seq, ok: Type.Literal(false), error: ChannelErrorSchema }),
]);
export type ServerChannelMessage = Static<typeof ServerChannelMessageSchema>;

/** A message before its `seq` is stamped (the sender numbers them). */
export type Unsequenced<M> = M extends unknown ? Omit<M, 'seq'> : never;

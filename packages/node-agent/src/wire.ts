import {
  WorkItemSchema,
  type EventsResponseWire,
  type HeartbeatBodyWire,
  type HeartbeatResponseWire,
  type NodeRegisterRequestWire,
  type NodeRegisterResponseWire,
  type ReceiptMetadataWire,
  type ReceiptUploadWire,
  type ResultUploadWire,
  type StreamEventWire,
  type WorkFailRequestWire,
  type WorkItemWire,
} from '@svc/protocol';
import { TypeCompiler } from '@sinclair/typebox/compiler';

/**
 * The JSON bodies of docs/node-protocol.md, as the agent sends and reads them: every type is the
 * `Static<>` of the one schema in packages/protocol that the server's routes validate with.
 */

/** `POST /api/v1/node/register` body, without `pubkey` and `signature` (the client adds them). */
export type RegisterInfo = Omit<NodeRegisterRequestWire, 'pubkey' | 'signature'>;

export type RegisterResponse = NodeRegisterResponseWire;

/** `work` is `job` for marketplace jobs, else the gateway request type. */
export type WorkType = 'job' | 'chat' | 'embeddings' | 'transcription' | 'image';

/** One item of `GET /api/v1/node/work` (and of the channel's `work` message). */
export type WorkItem = WorkItemWire;

export type HeartbeatRequest = HeartbeatBodyWire;

/** A heartbeat's answer; `lease_expires_at` is left out when the server sent none usable. */
export type HeartbeatResponse = Pick<HeartbeatResponseWire, 'cancel'> & Partial<HeartbeatResponseWire>;

/** `POST /api/v1/node/work/{id}/result`. */
export type ResultUpload = ResultUploadWire;

/** `metadata` of a receipt: outside the SVC1 signature. */
export type ReceiptMetadata = ReceiptMetadataWire;

/** `POST /api/v1/node/receipt` (NodeReceiptRequest); `result` carries the result inline (gateway work). */
export type ReceiptUpload = ReceiptUploadWire;

export type FailUpload = WorkFailRequestWire;

/** One NDJSON line of `POST /api/v1/node/work/{id}/events` (streamed chat). */
export type StreamEventLine = StreamEventWire;

/** The answer to an events call: `cancel` means stop the work and upload nothing. */
export type EventsResponse = EventsResponseWire;

// `lease_expires_at` is checked as a string: the server's `date-time` format is its own promise.
const checkWorkItem = TypeCompiler.Compile(WorkItemSchema);

/**
 * Work ids become file names (`outbox/<work_id>.json`, `scratch/<work_id>`) and URL segments,
 * so the agent only accepts ids that are safe as both.
 */
export const WORK_ID_PATTERN = /^[A-Za-z0-9_:-][A-Za-z0-9._:-]{0,127}$/;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Reads the `work` array of a poll answer (or of a channel `work` message). Each item is checked
 * against the protocol's schema; items that do not fit it, or whose `work_id` is not safe as a
 * file name, are dropped and returned in `rejected` (the agent warns about them).
 *
 * @example
 * const { items } = parseWorkList(await response.json());
 */
export function parseWorkList(body: unknown): { items: WorkItem[]; rejected: unknown[] } {
  const list = isRecord(body) && Array.isArray(body.work) ? (body.work as unknown[]) : [];
  const items: WorkItem[] = [];
  const rejected: unknown[] = [];
  for (const raw of list) {
    if (checkWorkItem.Check(raw) && WORK_ID_PATTERN.test(raw.work_id)) items.push(raw);
    else rejected.push(raw);
  }
  return { items, rejected };
}

/**
 * Reads an events answer; anything missing means "go on".
 *
 * @example
 * parseEventsResponse({ accepted: 3, cancel: true }).cancel; // true
 */
export function parseEventsResponse(body: unknown): EventsResponse {
  const accepted = isRecord(body) && typeof body.accepted === 'number' ? body.accepted : 0;
  return { accepted, cancel: isRecord(body) && body.cancel === true };
}

/**
 * Reads a heartbeat answer; anything missing is an empty cancel list.
 *
 * @example
 * parseHeartbeat({ cancel: ['wrk_1'] }).cancel; // ['wrk_1']
 */
export function parseHeartbeat(body: unknown): HeartbeatResponse {
  const cancel =
    isRecord(body) && Array.isArray(body.cancel)
      ? body.cancel.filter((id): id is string => typeof id === 'string')
      : [];
  const lease = isRecord(body) && typeof body.lease_expires_at === 'string' ? body.lease_expires_at : undefined;
  return lease === undefined ? { cancel } : { cancel, lease_expires_at: lease };
}

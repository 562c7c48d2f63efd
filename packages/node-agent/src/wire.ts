/** The JSON bodies of docs/node-protocol.md, as the agent sends and reads them. */

/** `POST /api/v1/node/register` body, without `pubkey` and `signature` (the client adds them). */
export interface RegisterInfo {
  device_type?: string;
  gpu_model?: string;
  cpu_cores?: number;
  ram_bytes?: number;
  vram_bytes?: number;
  bandwidth_mbps?: number;
  attestation_method?: number;
  geohash_bucket?: number;
  sensors?: string;
  country?: string;
  region?: string;
  models?: string[];
  capabilities?: string[];
  max_concurrency?: number;
  price_micro_per_unit?: Record<string, number>;
  green?: boolean;
  name?: string;
}

export interface RegisterResponse {
  node_id: string;
  /** The node channel's path, when the server offers it (docs/node-protocol.md). */
  channel?: string;
  status: string;
  poll_interval_ms?: number;
  server_public_key?: string;
  /** How long the server keeps a lease between heartbeats; the agent beats at least 3 times per lease. */
  lease_seconds?: number;
}

/** `work` is `job` for marketplace jobs, else the gateway request type. */
export type WorkType = 'job' | 'chat' | 'embeddings' | 'transcription' | 'image';

/** One item of `GET /api/v1/node/work`. */
export interface WorkItem {
  work_id: string;
  job_id: string;
  type: WorkType | (string & {});
  kind?: number;
  model?: string;
  payload: Record<string, unknown>;
  stream: boolean;
  lease_expires_at?: string;
}

export interface HeartbeatRequest {
  load: number;
  active_work: string[];
  models?: string[];
  free_vram_bytes?: number;
}

export interface HeartbeatResponse {
  cancel: string[];
  lease_expires_at?: string;
}

/** `POST /api/v1/node/work/{id}/result`. */
export interface ResultUpload {
  output: string;
  encoding: 'utf8' | 'base64';
  content_type: string;
  result_hash: string;
  metering_units: number;
  usage: Record<string, number>;
  exit_code?: number;
}

/** `metadata` of a receipt: outside the SVC1 signature. */
export interface ReceiptMetadata {
  model?: string;
  engine: string;
  gpu_model?: string;
  country?: string;
  region?: string;
  duration_ms: number;
  exit_code?: number;
}

/** `POST /api/v1/node/receipt` (NodeReceiptRequest). */
export interface ReceiptUpload {
  job_id: string;
  pubkey: string;
  result_hash: string;
  signature: string;
  metering_units: number;
  metadata: ReceiptMetadata;
  /** The result itself, inline: stored and receipted in one call (gateway work). */
  result?: ResultUpload;
}

export interface FailUpload {
  message: string;
  retryable: boolean;
}

/** One NDJSON line of `POST /api/v1/node/work/{id}/events` (streamed chat). */
export type StreamEventLine =
  | { type: 'delta'; content: string }
  | {
      type: 'done';
      usage: { prompt_tokens: number; completion_tokens: number };
      finish_reason: string;
      result_hash?: string;
    }
  | { type: 'error'; message: string; retryable: boolean };

/** The answer to an events call: `cancel` means stop the work and upload nothing. */
export interface EventsResponse {
  accepted: number;
  cancel: boolean;
}

/**
 * Work ids become file names (`outbox/<work_id>.json`, `scratch/<work_id>`) and URL segments,
 * so the agent only accepts ids that are safe as both.
 */
export const WORK_ID_PATTERN = /^[A-Za-z0-9_:-][A-Za-z0-9._:-]{0,127}$/;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Reads the `work` array of a poll answer. Items without a usable `work_id` or `job_id` are
 * dropped (they could not even be reported as failed) and returned in `rejected`.
 *
 * @example
 * const { items } = parseWorkList(await response.json());
 */
export function parseWorkList(body: unknown): { items: WorkItem[]; rejected: unknown[] } {
  const list = isRecord(body) && Array.isArray(body.work) ? (body.work as unknown[]) : [];
  const items: WorkItem[] = [];
  const rejected: unknown[] = [];
  for (const raw of list) {
    if (
      !isRecord(raw) ||
      typeof raw.work_id !== 'string' ||
      !WORK_ID_PATTERN.test(raw.work_id) ||
      typeof raw.job_id !== 'string'
    ) {
      rejected.push(raw);
      continue;
    }
    items.push({
      work_id: raw.work_id,
      job_id: raw.job_id,
      type: typeof raw.type === 'string' ? raw.type : 'job',
      ...(typeof raw.kind === 'number' ? { kind: raw.kind } : {}),
      ...(typeof raw.model === 'string' ? { model: raw.model } : {}),
      payload: isRecord(raw.payload) ? raw.payload : {},
      stream: raw.stream === true,
      ...(typeof raw.lease_expires_at === 'string' ? { lease_expires_at: raw.lease_expires_at } : {}),
    });
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

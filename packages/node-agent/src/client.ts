import { NODE_HEADERS, registerMessage, requestMessage, signHex } from '@svc/protocol';
import { abortReason } from './backoff.js';
import { callSignal } from './call-signal.js';
import type { NodeIdentity } from './identity.js';
import {
  parseEventsResponse,
  parseHeartbeat,
  parseWorkList,
  type FailUpload,
  type HeartbeatRequest,
  type EventsResponse,
  type HeartbeatResponse,
  type ReceiptUpload,
  type RegisterInfo,
  type RegisterResponse,
  type ResultUpload,
  type StreamEventLine,
  type WorkItem,
} from './wire.js';

/**
 * A refusal or failure of a control-plane call. `status` is the HTTP status, or 0 when no answer
 * came (`error` is then `network_error` or `timeout`); `error` and `message` come from the
 * server's `{code, error, message}` body.
 */
export class ControlPlaneError extends Error {
  override name = 'ControlPlaneError';
  constructor(
    readonly status: number,
    readonly error: string,
    message: string,
    /** From a `Retry-After` header, when the server sent one. */
    readonly retryAfterMs?: number,
  ) {
    super(message);
  }

  /** Whether the same call may succeed later: no answer, 408, 425, 429 or a 5xx. */
  get retryable(): boolean {
    return this.status === 0 || this.status === 408 || this.status === 425 || this.status === 429 || this.status >= 500;
  }
}

export interface NodeClientOptions {
  /** Base URL of the control plane, `http(s)://host[:port][/prefix]`. */
  server: string;
  /** Operator-scoped API key; sent only to `register`. */
  apiKey: string;
  identity: NodeIdentity;
  /** Set when the node is already registered (tests); otherwise `register` sets it. */
  nodeId?: string;
  fetch?: typeof fetch;
  /** Per-call timeout unless a call says otherwise (default 30 s). */
  timeoutMs?: number;
  /** Clock for `X-SVC-Timestamp` (default `Date.now`). */
  now?: () => number;
}

export interface CallOptions {
  signal?: AbortSignal;
  timeoutMs?: number;
  /** The work a receipt is for: lets it travel over the node channel, whose `ack` names work ids. */
  workId?: string;
}

/** The node side of docs/node-protocol.md. Every method after `register` is signed. */
export interface NodeClient {
  readonly server: string;
  readonly nodeId: string | undefined;
  register(info: RegisterInfo, options?: CallOptions): Promise<RegisterResponse>;
  pollWork(
    query: { waitMs: number; max: number },
    options?: CallOptions,
  ): Promise<{ items: WorkItem[]; rejected: unknown[] }>;
  heartbeat(body: HeartbeatRequest, options?: CallOptions): Promise<HeartbeatResponse>;
  uploadResult(workId: string, body: ResultUpload, options?: CallOptions): Promise<unknown>;
  submitReceipt(body: ReceiptUpload, options?: CallOptions): Promise<unknown>;
  failWork(workId: string, body: FailUpload, options?: CallOptions): Promise<unknown>;
  /** Posts streamed events as one signed NDJSON batch; answers whether the work must stop. */
  postEvents(workId: string, events: readonly StreamEventLine[], options?: CallOptions): Promise<EventsResponse>;
  /** Any signed call: `pathWithQuery` is signed and sent exactly as given. */
  signedRequest(method: string, pathWithQuery: string, body?: unknown, options?: CallOptions): Promise<unknown>;
}

/**
 * Creates the protocol client. `register` authenticates with the operator key and signs its body;
 * every other call carries `X-SVC-Node`, `X-SVC-Timestamp` (ms) and `X-SVC-Signature` over the
 * exact path+query and body bytes sent. Failures are {@link ControlPlaneError}s.
 *
 * @example
 * const client = createNodeClient({ server: 'https://svc.example', apiKey, identity });
 * await client.register({ country: 'CA', models: ['tinyllama'] });
 * const { items } = await client.pollWork({ waitMs: 25_000, max: 1 });
 */
export function createNodeClient(options: NodeClientOptions): NodeClient {
  const base = new URL(options.server);
  if (base.protocol !== 'http:' && base.protocol !== 'https:') throw new TypeError('server must be an http(s) URL');
  const origin = base.origin;
  const prefix = base.pathname.replace(/\/+$/, '');
  const doFetch = options.fetch ?? fetch;
  const now = options.now ?? Date.now;
  // The signature covers method, path, timestamp and body, so two identical calls signed in the
  // same millisecond would carry the same one and the second be refused as a replay: each call's
  // timestamp is after the previous one's (ahead of the clock only while calls come faster than one a
  // millisecond: far within the 60 s skew the server allows).
  let lastTimestamp = 0;
  let nodeId = options.nodeId;

  async function send(
    method: string,
    path: string,
    headers: Record<string, string>,
    body: string | undefined,
    call: CallOptions,
  ) {
    const timeoutMs = call.timeoutMs ?? options.timeoutMs ?? 30_000;
    // Ended once the body is read: the agent's stop signal, which every call follows, keeps nothing of it.
    const scope = callSignal(timeoutMs, [call.signal]);
    const { signal } = scope;
    const fail = (err: unknown): never => {
      if (call.signal?.aborted) throw abortReason(call.signal);
      if (scope.timedOut())
        throw new ControlPlaneError(0, 'timeout', `no answer from ${origin} within ${timeoutMs} ms`);
      const cause = err instanceof Error ? (err.cause instanceof Error ? err.cause.message : err.message) : String(err);
      throw new ControlPlaneError(0, 'network_error', `cannot reach ${origin}: ${cause}`);
    };
    let res: Response;
    let text: string;
    try {
      res = await doFetch(`${origin}${path}`, { method, headers, ...(body === undefined ? {} : { body }), signal });
      text = await res.text();
    } catch (err) {
      return fail(err);
    } finally {
      scope.done();
    }
    if (!res.ok) throw errorFromResponse(res, text);
    if (text === '') return undefined;
    try {
      return JSON.parse(text) as unknown;
    } catch {
      throw new ControlPlaneError(
        res.status,
        'invalid_response',
        `${method} ${path} answered ${res.status} with a body that is not JSON`,
      );
    }
  }

  async function signedSend(
    method: string,
    pathWithQuery: string,
    text: string | undefined,
    contentType: string,
    call: CallOptions,
  ) {
    if (nodeId === undefined) throw new Error('the node is not registered yet');
    const path = `${prefix}${pathWithQuery}`;
    lastTimestamp = Math.max(now(), lastTimestamp + 1);
    const timestamp = String(lastTimestamp);
    const signature = signHex(
      requestMessage({ method, pathWithQuery: path, timestamp, body: text ?? '' }),
      options.identity.privateKey,
    );
    const headers: Record<string, string> = {
      [NODE_HEADERS.node]: nodeId,
      [NODE_HEADERS.timestamp]: timestamp,
      [NODE_HEADERS.signature]: signature,
      ...(text === undefined ? {} : { 'content-type': contentType }),
    };
    return send(method.toUpperCase(), path, headers, text, call);
  }

  function signedRequest(method: string, pathWithQuery: string, body?: unknown, call: CallOptions = {}) {
    return signedSend(
      method,
      pathWithQuery,
      body === undefined ? undefined : JSON.stringify(body),
      'application/json',
      call,
    );
  }

  const workPath = (workId: string, action: string) => `/api/v1/node/work/${encodeURIComponent(workId)}/${action}`;

  return {
    server: options.server,
    get nodeId() {
      return nodeId;
    },
    async register(info, call = {}) {
      const pubkey = options.identity.publicKeyHex;
      const body: Record<string, unknown> = { ...withoutUndefined(info), pubkey };
      const signature = signHex(registerMessage(pubkey, body), options.identity.privateKey);
      const headers = { authorization: `Bearer ${options.apiKey}`, 'content-type': 'application/json' };
      const answer = await send(
        'POST',
        `${prefix}/api/v1/node/register`,
        headers,
        JSON.stringify({ ...body, signature }),
        call,
      );
      const record = (typeof answer === 'object' && answer !== null ? answer : {}) as Record<string, unknown>;
      if (typeof record.node_id !== 'string')
        throw new ControlPlaneError(502, 'invalid_response', 'register answered without a node_id');
      nodeId = record.node_id;
      return record as unknown as RegisterResponse;
    },
    async pollWork({ waitMs, max }, call = {}) {
      const path = `/api/v1/node/work?wait_ms=${waitMs}&max=${max}`;
      return parseWorkList(await signedRequest('GET', path, undefined, { timeoutMs: waitMs + 15_000, ...call }));
    },
    async heartbeat(body, call = {}) {
      return parseHeartbeat(await signedRequest('POST', '/api/v1/node/heartbeat', body, call));
    },
    uploadResult: (workId, body, call = {}) => signedRequest('POST', workPath(workId, 'result'), body, call),
    submitReceipt: (body, call = {}) => signedRequest('POST', '/api/v1/node/receipt', body, call),
    failWork: (workId, body, call = {}) => signedRequest('POST', workPath(workId, 'fail'), body, call),
    async postEvents(workId, events, call = {}) {
      const text = events.map((e) => `${JSON.stringify(e)}\n`).join('');
      return parseEventsResponse(
        await signedSend('POST', workPath(workId, 'events'), text, 'application/x-ndjson', call),
      );
    },
    signedRequest,
  };
}

function errorFromResponse(res: Response, text: string): ControlPlaneError {
  let error = `http_${res.status}`;
  let message = text.slice(0, 300) || res.statusText || `HTTP ${res.status}`;
  try {
    const body: unknown = JSON.parse(text);
    if (typeof body === 'object' && body !== null) {
      const fields = body as Record<string, unknown>;
      if (typeof fields.error === 'string') error = fields.error;
      if (typeof fields.message === 'string') message = fields.message;
    }
  } catch {
    // Not JSON (a proxy's error page): keep the start of the text as the message.
  }
  const header = res.headers.get('retry-after');
  const retryAfter = header === null || header.trim() === '' ? Number.NaN : Number(header);
  const retryAfterMs = Number.isFinite(retryAfter) && retryAfter >= 0 ? retryAfter * 1000 : undefined;
  return new ControlPlaneError(res.status, error, message, retryAfterMs);
}

/** JCS (and so the registration signature) refuses `undefined`; optional fields are left out. */
function withoutUndefined(value: object): Record<string, unknown> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined));
}

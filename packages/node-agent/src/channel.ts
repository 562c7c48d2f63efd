import {
  hop,
  NODE_CHANNEL_MAX_MESSAGE_BYTES,
  NODE_HEADERS,
  ServerChannelMessageSchema,
  requestMessage,
  signHex,
  tickCork,
  type NodeChannelMessage,
  type ServerChannelMessage,
  type Unsequenced,
} from '@svc/protocol';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import type { Socket } from 'node:net';
import WebSocket from 'ws';
import { abortReason, backoffDelay, type BackoffPolicy } from './backoff.js';
import { ControlPlaneError, type CallOptions, type NodeClient } from './client.js';
import type { NodeIdentity } from './identity.js';
import { parseEventsResponse, parseHeartbeat, parseWorkList, type WorkItem } from './wire.js';

const checkServerMessage = TypeCompiler.Compile(ServerChannelMessageSchema);

/** A node message before the channel numbers it. */
export type OutgoingMessage = Unsequenced<NodeChannelMessage>;

export interface NodeChannelOptions {
  /** Base URL of the control plane (`http(s)://...`); the channel is its `ws(s)://` twin. */
  server: string;
  /** The path the server offered at registration (`channel` of the register answer). */
  path: string;
  identity: NodeIdentity;
  nodeId: () => string | undefined;
  /** Between reconnection attempts (default 0.5 s doubling to 10 s, full jitter). */
  backoff?: BackoffPolicy;
  /** Called each time the channel opens, with how many times it opened before. */
  onOpen?: (opened: number) => void;
  onWarning?: (message: string) => void;
  /** Clock for the handshake's timestamp (default `Date.now`). */
  now?: () => number;
  /** How often the node pings; a channel without a pong for two periods is dropped (default 15 s). */
  pingMs?: number;
  /** Work pushed on granted slots (not the answer to a pull). */
  onWork?: (work: { items: WorkItem[]; rejected: unknown[] }) => void;
  /** The channel said hello (`grants` is known) or closed: the agent looks at its slots again. */
  onChange?: () => void;
}

/** The node side of the channel: requests answered by `reply`, receipts by `ack`, pulls by `work`. */
export interface NodeChannel {
  /** Whether messages can be sent now (the channel opened and the server said hello). */
  readonly open: boolean;
  /** Resolves once the first connection attempt ended (true when it opened and the server said hello). */
  ready(): Promise<boolean>;
  /** Whether this connection takes `grant` messages (its `hello` said so); false while closed. */
  readonly grants: boolean;
  /** Slots granted on this connection that no pushed item has spent yet (0 while closed). */
  readonly granted: number;
  /**
   * Grants `slots` more standing slots (docs/node-protocol.md, "Standing slots"): the server pushes
   * work on them (`onWork`) without a pull. False when the channel cannot take it now.
   */
  grant(slots: number): boolean;
  /** Sends a message answered by a `reply`; resolves with its body, rejects with a ControlPlaneError. */
  request(
    message: Exclude<OutgoingMessage, { type: 'pull' | 'receipt' | 'grant' }>,
    options?: CallOptions,
  ): Promise<unknown>;
  /** Sends a receipt; resolves when the server acknowledges that its records are committed. */
  receipt(message: Extract<OutgoingMessage, { type: 'receipt' }>, options?: CallOptions): Promise<void>;
  /** Asks for up to `max` items; resolves with them once pushed, or with none when the channel closes. */
  pull(max: number, signal?: AbortSignal): Promise<{ items: WorkItem[]; rejected: unknown[] }>;
  close(): Promise<void>;
}

interface Pending {
  kind: 'reply' | 'receipt' | 'pull';
  resolve: (value: unknown) => void;
  reject: (error: Error) => void;
}

/** The `ws(s)://` URL of the channel path on `server` (its path prefix kept). */
export function channelUrl(server: string, path: string): URL {
  const base = new URL(server);
  const url = new URL(`${base.pathname.replace(/\/+$/, '')}${path}`, base);
  url.protocol = base.protocol === 'https:' ? 'wss:' : 'ws:';
  return url;
}

/**
 * Keeps the node channel open (docs/node-protocol.md, "The node channel"): a signed `GET` that
 * upgrades to a WebSocket, reconnected with backoff whenever it drops. Messages carry an
 * increasing `seq`; a closed channel fails what waits on it (`network_error`), so callers retry
 * or fall back to the HTTP paths. A server without the channel (404 on the upgrade) is not asked
 * again.
 *
 * @example
 * const channel = createNodeChannel({ server, path: '/api/v1/node/channel', identity, nodeId: () => id });
 * if (await channel.ready()) await channel.receipt({ type: 'receipt', work_id, receipt });
 */
export function createNodeChannel(options: NodeChannelOptions): NodeChannel {
  const backoff = options.backoff ?? { baseMs: 500, capMs: 10_000 };
  const now = options.now ?? Date.now;
  const pingMs = options.pingMs ?? 15_000;
  const pending = new Map<number, Pending>();
  /** Receipts waiting for their ack, by work id (seq in `pending`). */
  const receipts = new Map<string, number>();
  let socket: WebSocket | undefined;
  let isOpen = false;
  let hello = false;
  let grants = false;
  let granted = 0;
  let seq = 0;
  let opened = 0;
  let failures = 0;
  let closed = false;
  let unsupported = false;
  let retryTimer: NodeJS.Timeout | undefined;
  let pingTimer: NodeJS.Timeout | undefined;
  let firstAttempt: ((ok: boolean) => void) | undefined;
  const ready = new Promise<boolean>((resolve) => (firstAttempt = resolve));
  const settleFirst = (ok: boolean) => {
    firstAttempt?.(ok);
    firstAttempt = undefined;
  };

  const dropAll = () => {
    for (const [id, p] of pending) {
      pending.delete(id);
      if (p.kind === 'pull') p.resolve({ items: [], rejected: [] });
      else p.reject(new ControlPlaneError(0, 'network_error', 'the node channel closed before the answer'));
    }
  };

  const onMessage = (data: WebSocket.RawData) => {
    hop('node.work');
    let value: unknown;
    try {
      value = JSON.parse(data.toString());
    } catch {
      options.onWarning?.('the server sent a channel message that is not JSON');
      return;
    }
    if (!checkServerMessage.Check(value)) {
      options.onWarning?.('the server sent a channel message this agent does not know; ignored');
      return;
    }
    const m: ServerChannelMessage = value;
    if (m.type === 'hello') {
      hello = true;
      grants = m.grants === true;
      granted = 0;
      settleFirst(true);
      options.onChange?.();
      return;
    }
    if (m.type === 'ack') {
      // One ack may name several receipts (a server may acknowledge a whole commit at once).
      for (const workId of m.work_ids) {
        const id = receipts.get(workId);
        if (id !== undefined) pending.get(id)?.resolve(undefined);
      }
      if (m.re !== undefined && pending.get(m.re)?.kind === 'receipt') pending.get(m.re)?.resolve(undefined);
      return;
    }
    const re = m.re;
    const waiting = re === undefined ? undefined : pending.get(re);
    if (m.type === 'work' && waiting?.kind !== 'pull') {
      // Pushed on granted slots: each item spends one.
      const work = parseWorkList({ work: m.work });
      granted = Math.max(0, granted - m.work.length);
      options.onWork?.(work);
      return;
    }
    if (waiting === undefined || re === undefined) {
      if (m.type === 'reply' && !m.ok) options.onWarning?.(`the server refused a channel message: ${m.error.message}`);
      return;
    }
    pending.delete(re);
    if (m.type === 'work') waiting.resolve(parseWorkList({ work: m.work }));
    else if (m.ok) waiting.resolve(m.body);
    else waiting.reject(new ControlPlaneError(m.error.code, m.error.error, m.error.message));
  };

  const scheduleReconnect = () => {
    if (closed || unsupported || retryTimer) return;
    const delay = backoffDelay(failures++, backoff);
    retryTimer = setTimeout(() => {
      retryTimer = undefined;
      connect();
    }, delay);
    retryTimer.unref();
  };

  function connect(): void {
    const nodeId = options.nodeId();
    if (closed || nodeId === undefined) return;
    const url = channelUrl(options.server, options.path);
    const timestamp = String(now());
    const signature = signHex(
      requestMessage({ method: 'GET', pathWithQuery: url.pathname, timestamp, body: '' }),
      options.identity.privateKey,
    );
    const ws = new WebSocket(url, {
      headers: {
        [NODE_HEADERS.node]: nodeId,
        [NODE_HEADERS.timestamp]: timestamp,
        [NODE_HEADERS.signature]: signature,
      },
      maxPayload: NODE_CHANNEL_MAX_MESSAGE_BYTES,
      handshakeTimeout: 10_000,
    });
    socket = ws;
    let alive = true;
    ws.on('open', () => {
      isOpen = true;
      failures = 0;
      alive = true;
      pingTimer = setInterval(() => {
        if (!alive) {
          ws.terminate();
          return;
        }
        alive = false;
        ws.ping();
      }, pingMs);
      pingTimer.unref();
      options.onOpen?.(opened++);
    });
    ws.on('pong', () => (alive = true));
    ws.on('message', onMessage);
    ws.on('unexpected-response', (_req, res) => {
      if (res.statusCode === 404) {
        unsupported = true;
        options.onWarning?.('the server does not offer the node channel; using the HTTP long-poll');
      } else options.onWarning?.(`the node channel was refused (HTTP ${res.statusCode}); retrying`);
      res.resume();
      ws.terminate();
    });
    ws.on('error', (err) => {
      if (!isOpen) options.onWarning?.(`cannot open the node channel: ${err.message}`);
    });
    ws.on('close', () => {
      if (socket === ws) socket = undefined;
      clearInterval(pingTimer);
      isOpen = false;
      // Granted slots end with the connection (the server forgets them too).
      hello = false;
      grants = false;
      granted = 0;
      settleFirst(false);
      dropAll();
      options.onChange?.();
      scheduleReconnect();
    });
  }

  // Frames sent in one tick leave in one write: the socket is corked from the first send of a tick
  // to the next tick (what ws's maintainers advise for batching: cork `websocket._socket`). Under
  // load a receipt and the grant of the slot it freed go out together: one segment, one wakeup of
  // the server. The frames and their order are unchanged.
  const cork = tickCork();
  const write = (ws: WebSocket, text: string) => {
    cork((ws as unknown as { _socket?: Socket })._socket);
    hop('node.sent');
    ws.send(text);
  };

  const send = (message: OutgoingMessage, kind: Pending['kind'], call: CallOptions = {}): Promise<unknown> => {
    const ws = socket;
    if (!isOpen || ws === undefined)
      return Promise.reject(new ControlPlaneError(0, 'network_error', 'the node channel is not open'));
    if (call.signal?.aborted) return Promise.reject(abortReason(call.signal));
    const id = ++seq;
    return new Promise((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const onAbort = () => finish(() => reject(abortReason(call.signal)));
      const workId = message.type === 'receipt' ? message.work_id : undefined;
      const finish = (then: () => void) => {
        clearTimeout(timer);
        call.signal?.removeEventListener('abort', onAbort);
        pending.delete(id);
        if (workId !== undefined && receipts.get(workId) === id) receipts.delete(workId);
        then();
      };
      pending.set(id, { kind, resolve: (v) => finish(() => resolve(v)), reject: (e) => finish(() => reject(e)) });
      if (workId !== undefined) receipts.set(workId, id);
      call.signal?.addEventListener('abort', onAbort, { once: true });
      if (kind !== 'pull') {
        const ms = call.timeoutMs ?? 30_000;
        timer = setTimeout(
          () =>
            finish(() => reject(new ControlPlaneError(0, 'timeout', `no answer on the node channel within ${ms} ms`))),
          ms,
        );
      }
      write(ws, JSON.stringify({ ...message, seq: id }));
    });
  };

  connect();
  if (options.nodeId() === undefined) settleFirst(false);
  return {
    get open() {
      // After the hello, which says whether the server takes grants.
      return isOpen && hello;
    },
    ready: () => ready,
    get grants() {
      return isOpen && hello && grants;
    },
    get granted() {
      return granted;
    },
    grant(slots) {
      const ws = socket;
      if (!isOpen || !grants || ws === undefined) return false;
      granted += slots;
      write(ws, JSON.stringify({ type: 'grant', slots, seq: ++seq }));
      return true;
    },
    request: (message, call) => send(message, 'reply', call),
    receipt: async (message, call) => {
      await send(message, 'receipt', call);
    },
    pull: async (max, signal) => {
      // A pull is answered only by work: on abort or close it ends with none.
      const r = await send({ type: 'pull', max }, 'pull', signal ? { signal } : {}).catch((err: unknown) => {
        if (err instanceof ControlPlaneError && err.status !== 0) throw err;
        return undefined;
      });
      return (r as { items: WorkItem[]; rejected: unknown[] } | undefined) ?? { items: [], rejected: [] };
    },
    async close() {
      closed = true;
      clearTimeout(retryTimer);
      const ws = socket;
      if (ws === undefined) return;
      await new Promise<void>((resolve) => {
        ws.once('close', () => resolve());
        ws.close(1000, 'the node is stopping');
        setTimeout(() => {
          ws.terminate();
          resolve();
        }, 2_000).unref();
      });
    },
  };
}

/**
 * The protocol client over the channel while it is open, over HTTP otherwise: the same calls,
 * the same answers and the same errors, so the agent's delivery and retry rules stay as they are.
 * A receipt goes over the channel only with its work id (`options.workId`), which its `ack` names.
 *
 * @example
 * const client = channelClient(createNodeClient({ server, apiKey, identity }), channel);
 */
export function channelClient(http: NodeClient, channel: NodeChannel): NodeClient {
  return {
    get server() {
      return http.server;
    },
    get nodeId() {
      return http.nodeId;
    },
    register: (info, call) => http.register(info, call),
    signedRequest: (method, path, body, call) => http.signedRequest(method, path, body, call),
    pollWork: (query, call = {}) => (channel.open ? channel.pull(query.max, call.signal) : http.pollWork(query, call)),
    heartbeat: async (body, call) =>
      channel.open
        ? parseHeartbeat(await channel.request({ type: 'heartbeat', body }, call))
        : http.heartbeat(body, call),
    uploadResult: (workId, body, call) =>
      channel.open
        ? channel.request({ type: 'result', work_id: workId, result: body }, call)
        : http.uploadResult(workId, body, call),
    submitReceipt: (body, call = {}) =>
      channel.open && call.workId !== undefined
        ? channel.receipt({ type: 'receipt', work_id: call.workId, receipt: body }, call)
        : http.submitReceipt(body, call),
    failWork: (workId, body, call) =>
      channel.open
        ? channel.request({ type: 'fail', work_id: workId, message: body.message, retryable: body.retryable }, call)
        : http.failWork(workId, body, call),
    postEvents: async (workId, events, call) =>
      channel.open
        ? parseEventsResponse(await channel.request({ type: 'events', work_id: workId, events: [...events] }, call))
        : http.postEvents(workId, events, call),
  };
}

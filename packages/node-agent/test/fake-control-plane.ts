/**
 * A small fake control plane for agent tests: the node side of docs/node-protocol.md on
 * node:http, verifying every signature exactly as the doc says (401 otherwise). Tests only.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  NODE_HEADERS,
  NODE_MAX_CLOCK_SKEW_MS,
  registerMessage,
  requestMessage,
  sha256Hex,
  verifyHex,
  verifySvc1,
} from '@svc/protocol';

export interface FakeWork {
  work_id: string;
  job_id: string;
  type: string;
  kind?: number;
  model?: string;
  payload: Record<string, unknown>;
  stream?: boolean;
}

export interface RecordedRequest {
  method: string;
  /** The request target exactly as received. */
  path: string;
  headers: IncomingMessage['headers'];
  body: Buffer;
  status: number;
}

type Route = 'register' | 'work' | 'heartbeat' | 'result' | 'receipt' | 'fail' | 'events';

export interface FakeControlPlane {
  url: string;
  apiKey: string;
  /** Every request, in arrival order, with the status it got. */
  requests: RecordedRequest[];
  nodes: Map<string, { node_id: string; pubkey: string; body: Record<string, unknown> }>;
  polls: { wait_ms: number; max: number }[];
  heartbeats: { load: number; active_work: string[]; models?: string[] }[];
  /** Accepted results by work id: the raw body and the decoded output bytes. */
  results: Map<string, { raw: Buffer; body: Record<string, unknown>; output: Buffer }>;
  receipts: Map<string, Record<string, unknown>>;
  fails: Map<string, { message: string; retryable: boolean }>;
  /** Streamed events by work id, in arrival order, and the batch sizes they came in. */
  events: Map<string, Record<string, unknown>[]>;
  eventBatches: Map<string, number[]>;
  /** Queues work for the next polls. */
  enqueue(...items: FakeWork[]): void;
  /** Marks work as leased to the node with this public key, as if handed out before a crash. */
  lease(item: FakeWork, pubkey: string): void;
  /** Heartbeat answers list this work in `cancel` from now on. */
  cancel(workId: string): void;
  /** The next requests to `route` get these statuses (`{code, error, message}` bodies). */
  failNext(route: Route, statuses: number[]): void;
  /** Requests to `route`, in order. */
  calls(route: Route): RecordedRequest[];
  waitFor(predicate: () => boolean, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

function routeOf(method: string, path: string): Route | undefined {
  if (method === 'POST' && path === '/api/v1/node/register') return 'register';
  if (method === 'GET' && path.startsWith('/api/v1/node/work?')) return 'work';
  if (method === 'POST' && path === '/api/v1/node/heartbeat') return 'heartbeat';
  if (method === 'POST' && path === '/api/v1/node/receipt') return 'receipt';
  if (method === 'POST' && /^\/api\/v1\/node\/work\/[^/]+\/result$/.test(path)) return 'result';
  if (method === 'POST' && /^\/api\/v1\/node\/work\/[^/]+\/fail$/.test(path)) return 'fail';
  if (method === 'POST' && /^\/api\/v1\/node\/work\/[^/]+\/events$/.test(path)) return 'events';
  return undefined;
}

const ERRORS: Record<number, string> = {
  400: 'invalid_request',
  401: 'unauthorized',
  404: 'not_found',
  409: 'conflict',
  503: 'no_capacity',
  500: 'internal',
};

/**
 * Starts the fake on 127.0.0.1 with a random port. `maxWaitMs` caps long polls so tests stay fast.
 *
 * @example
 * const cp = await startFakeControlPlane();
 * cp.enqueue({ work_id: 'wrk_1', job_id: 'job_1', type: 'job', kind: 1, model: 'tinyllama', payload: { inputs: ['hi'] } });
 */
export async function startFakeControlPlane(
  options: { apiKey?: string; maxWaitMs?: number } = {},
): Promise<FakeControlPlane> {
  const apiKey = options.apiKey ?? `svc_op_${randomBytes(8).toString('hex')}`;
  const maxWaitMs = options.maxWaitMs ?? 200;
  const requests: RecordedRequest[] = [];
  const nodes: FakeControlPlane['nodes'] = new Map();
  const queue: FakeWork[] = [];
  const leases = new Map<string, { item: FakeWork; pubkey: string }>();
  const cancelled = new Set<string>();
  const seenSignatures = new Set<string>();
  const faults = new Map<Route, number[]>();
  const waiters = new Set<() => void>();
  const cp: Omit<FakeControlPlane, 'url' | 'close'> = {
    apiKey,
    requests,
    nodes,
    polls: [],
    heartbeats: [],
    results: new Map(),
    receipts: new Map(),
    fails: new Map(),
    events: new Map(),
    eventBatches: new Map(),
    enqueue(...items) {
      queue.push(...items);
      for (const wake of waiters) wake();
    },
    lease(item, pubkey) {
      leases.set(item.work_id, { item, pubkey });
    },
    cancel(workId) {
      cancelled.add(workId);
    },
    failNext(route, statuses) {
      faults.set(route, [...(faults.get(route) ?? []), ...statuses]);
    },
    calls(route) {
      return requests.filter((r) => routeOf(r.method, r.path) === route);
    },
    async waitFor(predicate, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      while (!predicate()) {
        if (Date.now() > deadline) throw new Error('fake control plane: condition not met in time');
        await new Promise((r) => setTimeout(r, 10));
      }
    },
  };

  function authenticate(req: IncomingMessage, body: Buffer): { node_id: string; pubkey: string } | string {
    const nodeId = req.headers[NODE_HEADERS.node];
    const timestamp = req.headers[NODE_HEADERS.timestamp];
    const signature = req.headers[NODE_HEADERS.signature];
    if (typeof nodeId !== 'string' || typeof timestamp !== 'string' || typeof signature !== 'string')
      return 'missing node headers';
    const node = nodes.get(nodeId);
    if (node === undefined) return 'unknown node';
    if (!/^\d+$/.test(timestamp) || Math.abs(Date.now() - Number(timestamp)) > NODE_MAX_CLOCK_SKEW_MS)
      return 'clock skew';
    if (seenSignatures.has(signature)) return 'replayed signature';
    const message = requestMessage({ method: req.method ?? '', pathWithQuery: req.url ?? '', timestamp, body });
    if (!verifyHex(message, signature, node.pubkey)) return 'bad signature';
    seenSignatures.add(signature);
    return node;
  }

  async function handle(req: IncomingMessage, res: ServerResponse, record: RecordedRequest): Promise<void> {
    const send = (status: number, value: unknown) => {
      record.status = status;
      res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(value));
    };
    const refuse = (status: number, message: string) =>
      send(status, { code: status, error: ERRORS[status] ?? 'internal', message });
    const route = routeOf(record.method, record.path);
    if (route === undefined) return refuse(404, `no route ${record.method} ${record.path}`);
    const fault = faults.get(route)?.shift();
    if (fault !== undefined) return refuse(fault, `injected ${fault}`);
    if (route === 'events') {
      const node = authenticate(req, record.body);
      if (typeof node === 'string') return refuse(401, node);
      if (req.headers['content-type'] !== 'application/x-ndjson') return refuse(400, 'events are application/x-ndjson');
      const workId = decodeURIComponent(record.path.split('/')[5] ?? '');
      if (leases.get(workId)?.pubkey !== node.pubkey) return refuse(404, 'work not leased to this node');
      const lines = record.body
        .toString('utf8')
        .split('\n')
        .filter((l) => l.trim() !== '')
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      cp.events.set(workId, [...(cp.events.get(workId) ?? []), ...lines]);
      cp.eventBatches.set(workId, [...(cp.eventBatches.get(workId) ?? []), lines.length]);
      return send(200, { accepted: lines.length, cancel: cancelled.has(workId) });
    }
    const json = record.body.length > 0 ? (JSON.parse(record.body.toString('utf8')) as Record<string, unknown>) : {};

    if (route === 'register') {
      if (req.headers.authorization !== `Bearer ${apiKey}`) return refuse(401, 'operator API key required');
      const pubkey = json.pubkey;
      if (typeof pubkey !== 'string' || typeof json.signature !== 'string')
        return refuse(400, 'pubkey and signature are required');
      if (!verifyHex(registerMessage(pubkey, json), json.signature, pubkey))
        return refuse(401, 'registration signature does not verify');
      const existing = [...nodes.values()].find((n) => n.pubkey === pubkey);
      const node_id = existing?.node_id ?? `node_${randomBytes(6).toString('hex')}`;
      nodes.set(node_id, { node_id, pubkey, body: json });
      return send(200, { node_id, status: 'online', poll_interval_ms: 1000, server_public_key: '00'.repeat(32) });
    }
    const node = authenticate(req, record.body);
    if (typeof node === 'string') return refuse(401, node);

    if (route === 'work') {
      const query = new URL(record.path, 'http://x').searchParams;
      const poll = { wait_ms: Number(query.get('wait_ms')), max: Number(query.get('max')) };
      cp.polls.push(poll);
      const deadline = Date.now() + Math.min(poll.wait_ms, maxWaitMs);
      let gone = false;
      res.once('close', () => {
        gone = true;
        for (const wake of waiters) wake();
      });
      while (queue.length === 0 && Date.now() < deadline && !gone) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(done, Math.max(0, deadline - Date.now()));
          function done() {
            clearTimeout(timer);
            waiters.delete(done);
            resolve();
          }
          waiters.add(done);
        });
      }
      // A poll the agent gave up on (it is stopping) must not take work: it would be lost with it.
      if (gone || res.destroyed) return;
      const work = queue.splice(0, poll.max).map((item) => {
        leases.set(item.work_id, { item, pubkey: node.pubkey });
        // Every field the server always sends (kind 0 and model null for what has none, as it does).
        return {
          stream: false,
          kind: 0,
          model: null,
          lease_expires_at: new Date(Date.now() + 30_000).toISOString(),
          ...item,
        };
      });
      return send(200, { work });
    }
    if (route === 'heartbeat') {
      cp.heartbeats.push(json as FakeControlPlane['heartbeats'][number]);
      const active = Array.isArray(json.active_work) ? json.active_work : [];
      return send(200, {
        cancel: active.filter((id) => typeof id === 'string' && cancelled.has(id)),
        lease_expires_at: new Date().toISOString(),
      });
    }
    if (route === 'result' || route === 'fail') {
      const workId = decodeURIComponent(record.path.split('/')[5] ?? '');
      if (leases.get(workId)?.pubkey !== node.pubkey) return refuse(404, 'work not leased to this node');
      if (route === 'fail') {
        cp.fails.set(workId, { message: String(json.message), retryable: json.retryable === true });
        return send(200, { ok: true });
      }
      const encoding = json.encoding === 'base64' ? 'base64' : 'utf8';
      const output = Buffer.from(String(json.output), encoding);
      if (sha256Hex(output) !== json.result_hash) return refuse(400, 'result_hash is not the SHA-256 of the output');
      const previous = cp.results.get(workId);
      if (previous && previous.body.result_hash !== json.result_hash)
        return refuse(409, 'a different result was delivered');
      cp.results.set(workId, { raw: record.body, body: json, output });
      return send(200, { ok: true });
    }
    // receipt
    const lease = [...leases.entries()].find(([, l]) => l.item.job_id === json.job_id && l.pubkey === node.pubkey);
    if (lease === undefined) return refuse(404, 'no work for this job is leased to this node');
    const [workId] = lease;
    // A receipt may carry its result inline (gateway work): stored first, as the real server does.
    if (typeof json.result === 'object' && json.result !== null && !cp.results.has(workId)) {
      const inline = json.result as Record<string, unknown>;
      const output = Buffer.from(String(inline.output), inline.encoding === 'base64' ? 'base64' : 'utf8');
      if (sha256Hex(output) !== inline.result_hash) return refuse(400, 'result_hash is not the SHA-256 of the output');
      cp.results.set(workId, { raw: record.body, body: inline, output });
    }
    const result = cp.results.get(workId);
    if (result === undefined || result.body.result_hash !== json.result_hash)
      return refuse(400, 'result_hash differs from the delivered result');
    if (cp.receipts.has(workId)) return refuse(409, 'a receipt was already stored for this work');
    const fields = {
      job_id: String(json.job_id),
      node_public_key_hex: node.pubkey,
      result_hash_hex: String(json.result_hash),
      metering_units: Number(json.metering_units),
    };
    if (json.pubkey !== node.pubkey || !verifySvc1(fields, String(json.signature)))
      return refuse(400, 'SVC1 signature does not verify');
    cp.receipts.set(workId, json);
    return send(200, { id: `rcpt_${workId}`, ...json, signature_version: 'SVC1' });
  }

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const record: RecordedRequest = {
        method: req.method ?? '',
        path: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks),
        status: 0,
      };
      requests.push(record);
      handle(req, res, record).catch((err: unknown) => {
        if (!res.headersSent)
          res.writeHead(500).end(JSON.stringify({ code: 500, error: 'internal', message: String(err) }));
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    ...cp,
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const wake of waiters) wake();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

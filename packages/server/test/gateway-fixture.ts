import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import {
  createNodeAgent,
  createOpenAIUpstreamEngine,
  type AgentEvent,
  type EngineSet,
  type NodeAgent,
} from '@svc/node-agent';
import { startOpenAITestServer, type OpenAITestServer, type OpenAITestServerOptions } from '@svc/node-agent/testing';
import { createKey, signUp, startTestServer, type TestBuyer, type TestStore } from './harness.js';

export { eventually } from './waits.js';

/** Every catalogue model the OpenAI test server can stand in for. */
export const UPSTREAM_MODELS = ['tinyllama', 'phi-4', 'all-MiniLM-L6-v2', 'whisper-base', 'sdxl-turbo'];

export interface GatewayNode {
  agent: NodeAgent;
  nodeId: string;
  upstream: OpenAITestServer | undefined;
  events: AgentEvent[];
  workEvents(): Extract<AgentEvent, { event: 'work' }>[];
  stop(): Promise<void>;
}

export interface GatewayFixture {
  server: Awaited<ReturnType<typeof startTestServer>>;
  buyer: TestBuyer;
  operatorKey: string;
  /** A real node agent (in-process) on the real server, its engine an OpenAI test server (or `engines`). */
  addNode(options?: {
    country?: string;
    region?: string;
    models?: string[];
    gpuModel?: string;
    upstream?: OpenAITestServerOptions;
    engines?: EngineSet;
    concurrency?: number;
    /** false keeps the agent on the HTTP long-poll and receipt routes (default: the node channel when offered). */
    channel?: boolean;
    /** Agent clocks other than TEST_TIMING's (a slow heartbeat, say). */
    timing?: Partial<typeof TEST_TIMING>;
  }): Promise<GatewayNode>;
  /** The official OpenAI client against the gateway; no retries, so every error is seen. */
  openai(apiKey?: string): OpenAI;
  /** A JSON call to the API with the buyer's key. */
  api(
    method: string,
    path: string,
    body?: unknown,
    apiKey?: string,
  ): Promise<{ status: number; headers: Headers; json: Record<string, unknown>; text: string }>;
  close(): Promise<void>;
}

/** Agent clocks for tests: quick heartbeats, short backoffs. */
export const TEST_TIMING = {
  waitMs: 5_000,
  heartbeatMs: 1_000,
  streamHeartbeatMs: 200,
  graceMs: 2_000,
  pollBackoff: { baseMs: 5, capMs: 50 },
  uploadBackoff: { baseMs: 5, capMs: 50 },
  uploadDeadlineMs: 5_000,
};

/**
 * A listening server, a signed-up buyer and an operator key; nodes are added per test. With
 * `store`, the server runs on that store and leaves it in place when closed (a restart test).
 *
 * @example
 * const f = await startGatewayFixture();
 * await f.addNode({ country: 'CA' });
 * await f.openai().chat.completions.create({ model: 'tinyllama', messages: [{ role: 'user', content: 'hi' }] });
 */
export async function startGatewayFixture(
  options: { env?: Record<string, string>; store?: TestStore } = {},
): Promise<GatewayFixture> {
  const server = await startTestServer({
    env: {
      SVC_RATE_LIMIT_BURST: '100000',
      SVC_ORG_RATE_LIMIT_BURST: '100000',
      SVC_ANON_RATE_LIMIT_BURST: '100000',
      SVC_LOG_LEVEL: 'warn',
      ...options.env,
    },
    ...(options.store ? { store: options.store } : {}),
  });
  const buyer = await signUp(server.app);
  // Nodes belong to another organization, so the buyer's ledger shows only what it pays.
  const operatorKey = await createKey(server.app, await signUp(server.app), ['operator'], 'operator');
  const nodes: GatewayNode[] = [];
  const fixture: GatewayFixture = {
    server,
    buyer,
    operatorKey,
    async addNode(o = {}) {
      const upstream = o.engines ? undefined : await startOpenAITestServer(o.upstream ?? {});
      const models = o.models ?? UPSTREAM_MODELS;
      const engines: EngineSet =
        o.engines ??
        (() => {
          const engine = createOpenAIUpstreamEngine({
            baseUrl: upstream?.url ?? '',
            models: new Map(models.map((m) => [m, m])),
            timeoutMs: 30_000,
          });
          return new Map(models.map((m) => [m, engine]));
        })();
      const dataDir = await mkdtemp(join(tmpdir(), 'svc-gw-node-'));
      const events: AgentEvent[] = [];
      const agent = createNodeAgent({
        server: server.url,
        apiKey: operatorKey,
        dataDir,
        engines,
        country: o.country ?? 'CA',
        region: o.region ?? 'ca-central',
        gpuModel: o.gpuModel ?? 'NVIDIA L4',
        concurrency: o.concurrency ?? 4,
        channel: o.channel,
        timing: { ...TEST_TIMING, ...o.timing },
        onEvent: (e) => events.push(e),
      });
      const { node_id } = await agent.start();
      let stopped = false;
      const node: GatewayNode = {
        agent,
        nodeId: node_id,
        upstream,
        events,
        workEvents: () => events.filter((e): e is Extract<AgentEvent, { event: 'work' }> => e.event === 'work'),
        async stop() {
          if (stopped) return;
          stopped = true;
          await agent.stop({ graceMs: 0 });
          await upstream?.close();
          await rm(dataDir, { recursive: true, force: true });
        },
      };
      nodes.push(node);
      return node;
    },
    openai: (apiKey = buyer.apiKey) =>
      new OpenAI({ apiKey, baseURL: `${server.url}/v1`, maxRetries: 0, timeout: 60_000 }),
    async api(method, path, body, apiKey = buyer.apiKey) {
      const res = await fetch(`${server.url}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${apiKey}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const text = await res.text();
      let json: Record<string, unknown> = {};
      try {
        json = JSON.parse(text) as Record<string, unknown>;
      } catch {
        // not JSON (CSV, text, SSE): see `text`
      }
      return { status: res.status, headers: res.headers, json, text };
    },
    async close() {
      await Promise.all(nodes.map((n) => n.stop()));
      await server.stop();
    },
  };
  return fixture;
}

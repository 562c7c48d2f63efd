import { NODE_CHANNEL_PATH, NODE_HEADERS, requestMessage, signHex, type ServerChannelMessage } from '@svc/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type OpenAI from 'openai';
import { request as httpRequest } from 'node:http';
import WebSocket from 'ws';
import { createTestNode, createTestStore, type TestNode, type WorkItem } from '../../../test/harness.js';
import {
  eventually,
  startGatewayFixture,
  type GatewayFixture,
  type GatewayNode,
} from '../../../test/gateway-fixture.js';
import { openDb, type Queryable } from '../../platform/db/index.js';
import { watchPollHangUps } from '../work/node-loss.js';

type Params = OpenAI.Chat.ChatCompletionCreateParamsNonStreaming;

/**
 * A node whose channel drops while it holds a buyer's request (docs/node-protocol.md, "A channel
 * that drops ends its gateway leases soon"): the node is no longer routed to, and the request's
 * lease ends SVC_CHANNEL_LOSS_GRACE_MS later, so a node that died is failed over in seconds rather
 * than after its lease (90 s here); a node still alive reconnects, heartbeats its work at once, and
 * answers the request itself. The grace is the default 2 s here, which the reconnecting node needs
 * (its backoff is up to 0.5 s); the other blocks, where no node comes back, shorten it.
 */
describe('a node channel that drops while it holds a request', () => {
  const s = withBackup();

  it('of a node that never comes back: the request fails over within seconds', async () => {
    const dead = await nodeHolding(s.f, 'are you there');
    // Cut without a close frame, as the kernel does for a killed process.
    const cut = Date.now();
    dead.ws.terminate();

    const { data, response } = await dead.answer;
    const waited = Date.now() - cut;
    const grace = s.f.server.ctx.config.channelLossGraceMs;
    expect(response.headers.get('x-svc-node')).toBe(s.backup.nodeId);
    expect(data.choices[0]?.message.content).toBe('You said: are you there');
    // Grace, then the once-a-second sweep (which tells the request on the bus).
    expect(waited).toBeGreaterThanOrEqual(grace - 100);
    expect(waited).toBeLessThan(grace + 4000);
    expect((await workLease(s.f.server.ctx.db, dead.workId))?.status).toBe('lost');
    // Nor is the dead node routed to any more: the next request goes to the backup at once.
    const next = await s.f.openai().chat.completions.create(ask('tinyllama', 'anyone else')).withResponse();
    expect(next.response.headers.get('x-svc-node')).toBe(s.backup.nodeId);
  }, 30_000);

  it('of a node that reconnects: it keeps the request and answers it', async () => {
    // Answers after the grace and a sweep have passed; heartbeats only every 30 s (a third of the
    // lease), so only the heartbeat sent on reconnecting can keep the lease. Its own model, so
    // that the request is not routed to the first case's dead node.
    const alive = await s.f.addNode({
      country: 'CA',
      region: 'ca-central',
      upstream: { delayMs: s.f.server.ctx.config.channelLossGraceMs + 2000 },
      timing: { heartbeatMs: 60_000 },
    });
    const answer = s.f.openai().chat.completions.create(ask('phi-4', 'still here')).withResponse();
    await eventually(() => (alive.upstream?.requests.length ?? 0) > 0);
    // Every channel drops (the server's side cut, as a network failure would), the backup's too.
    for (const client of s.f.server.app.websocketServer.clients) client.terminate();

    const { data, response } = await answer;
    expect(response.headers.get('x-svc-node')).toBe(alive.nodeId);
    expect(data.choices[0]?.message.content).toBe('You said: still here');
    // The backup served only the first case's two requests.
    expect(s.backup.workEvents()).toHaveLength(2);
    await alive.stop();
  }, 30_000);
});

describe('a node channel that goes silent (no close, no answer to pings)', () => {
  it('is dropped after a ping goes unanswered, and the request fails over', async () => {
    const f = await startGatewayFixture({
      env: { SVC_LEASE_SECONDS: '90', SVC_NODE_CHANNEL_PING_MS: '300', SVC_CHANNEL_LOSS_GRACE_MS: '500' },
    });
    try {
      const backup = await f.addNode({ country: 'US', region: 'us-east' });
      // A network that went quiet: the connection stays open and nothing comes back, pongs included.
      const quiet = await nodeHolding(f, 'hello?', { autoPong: false });
      const since = Date.now();
      const { data, response } = await quiet.answer;
      expect(response.headers.get('x-svc-node')).toBe(backup.nodeId);
      expect(data.choices[0]?.message.content).toBe('You said: hello?');
      // Dropped within two ping intervals of its last message; failed over after the grace.
      expect((await quiet.closed) - since).toBeLessThan(1_000);
      expect(Date.now() - since).toBeLessThan(f.server.ctx.config.channelLossGraceMs + 4000);
    } finally {
      await f.close();
    }
  }, 30_000);
});

describe('a node channel dropped late, after the node was heard from elsewhere', () => {
  it('changes nothing: the node stays routable and keeps its work', async () => {
    const f = await startGatewayFixture({
      env: {
        SVC_LEASE_SECONDS: '90',
        SVC_NODE_CHANNEL_PING_MS: '3000',
        SVC_SHUTDOWN_GRACE_MS: '200',
        SVC_CHANNEL_LOSS_GRACE_MS: '500',
      },
    });
    try {
      // A half-open channel: the server notices only when a ping goes unanswered (3 to 6 s).
      const late = await nodeHolding(f, 'over here', { autoPong: false });
      // Meanwhile the node, reconnected elsewhere, heartbeats its work (here over HTTP), well over a
      // second after its last message on this channel and well before the channel is dropped.
      await new Promise((r) => setTimeout(r, 2_500));
      expect((await late.node.heartbeat([late.workId])).cancel).toEqual([]);
      await late.closed;
      // The grace, a sweep and more: a drop taken for a loss would have ended the lease by now.
      await new Promise((r) => setTimeout(r, f.server.ctx.config.channelLossGraceMs + 1500));
      const lease = await workLease(f.server.ctx.db, late.workId);
      expect(lease?.status).toBe('leased');
      expect(lease?.left).toBeGreaterThan(60);
      expect((await f.server.ctx.nodeDirectory.serving('tinyllama')).map((n) => n.id)).toContain(late.node.nodeId);
    } finally {
      // The request ends with the server (no node answers it here).
      await f.close();
    }
  }, 30_000);
});

describe('a node channel that this instance closes as it shuts down', () => {
  it('is not a node lost: the work it holds keeps its lease (the node reconnects elsewhere)', async () => {
    const store = await createTestStore();
    try {
      const f = await startGatewayFixture({ store, env: { SVC_LEASE_SECONDS: '90', SVC_SHUTDOWN_GRACE_MS: '200' } });
      const held = await nodeHolding(f, 'hold on');
      await f.close();
      held.ws.terminate();
      const db = await openDb(store);
      try {
        const lease = await workLease(db, held.workId);
        expect(lease?.status).toBe('leased');
        expect(lease?.left).toBeGreaterThan(60);
      } finally {
        await db.close();
      }
    } finally {
      await store.drop();
    }
  }, 30_000);
});

describe('a node that hangs up its long-poll (HTTP, no channel)', () => {
  const s = withBackup({ SVC_CHANNEL_LOSS_GRACE_MS: '500', SVC_POLL_HANG_UP_GRACE_MS: '500' });

  it('and calls no more: not routed to, and the request it never took fails over within seconds', async () => {
    const node = await canadianNode(s.f, 'tinyllama');
    // A request it took over HTTP and holds (it stays leased: the node may still deliver it).
    const held = s.f.openai().chat.completions.create(ask('tinyllama', 'held'));
    held.catch(() => undefined);
    const taken = await eventuallyTaken(node);
    // Its next poll waits, then the process dies: the kernel closes the connection.
    const poll = await waitingPoll(s.f.server.url, node);
    poll.destroy();
    const hungUp = Date.now();
    // Routed to it while it is not polling (it still counts as live): left in the store for it.
    const { data, response } = await s.f
      .openai()
      .chat.completions.create(ask('tinyllama', 'still there?'))
      .withResponse();
    const waited = Date.now() - hungUp;
    const { pollHangUpGraceMs, channelLossGraceMs } = s.f.server.ctx.config;
    expect(response.headers.get('x-svc-node')).toBe(s.backup.nodeId);
    expect(data.choices[0]?.message.content).toBe('You said: still there?');
    // The grace for another call, the lease's grace, then the once-a-second sweep.
    expect(waited).toBeGreaterThanOrEqual(pollHangUpGraceMs + channelLossGraceMs - 200);
    expect(waited).toBeLessThan(pollHangUpGraceMs + channelLossGraceMs + 4000);
    // Nor is it routed to any more: the next request goes to the backup at once.
    const next = await s.f.openai().chat.completions.create(ask('tinyllama', 'anyone else')).withResponse();
    expect(next.response.headers.get('x-svc-node')).toBe(s.backup.nodeId);
    expect((await s.f.server.ctx.nodeDirectory.serving('tinyllama')).map((n) => n.id)).not.toContain(node.nodeId);
    // The work it took keeps its lease.
    const lease = await workLease(s.f.server.ctx.db, taken.work_id);
    expect(lease?.status).toBe('leased');
    expect(lease?.left).toBeGreaterThan(60);
    // Its next signed call makes it live again.
    await node.poll();
    await eventually(async () =>
      (await s.f.server.ctx.nodeDirectory.serving('tinyllama')).some((n) => n.id === node.nodeId),
    );
  }, 30_000);

  it('and polls again at once: nothing changes', async () => {
    const node = await canadianNode(s.f, 'phi-4');
    // A poll hung up well within a second of its start (whose call was recorded), then polled
    // again at once: that call must be recorded too, or the node would be taken for gone.
    const first = await waitingPoll(s.f.server.url, node);
    first.destroy();
    const again = await waitingPoll(s.f.server.url, node);
    await new Promise((r) => setTimeout(r, s.f.server.ctx.config.pollHangUpGraceMs + 500));
    expect((await s.f.server.ctx.nodeDirectory.serving('phi-4')).map((n) => n.id)).toContain(node.nodeId);
    again.destroy();
  }, 30_000);

  it("and polls again at once, the new poll read before the old one's close: nothing changes", async () => {
    // The order a loaded server can read them in (seen in CI): the new poll's call comes first,
    // within a second of the old one's, so the store has no record of it after the hang-up.
    const node = await canadianNode(s.f, 'svc-llama-3.2-3b');
    await s.f.server.ctx.db.query("UPDATE nodes SET last_seen = now() - interval '5 seconds' WHERE id = $1", [
      node.nodeId,
    ]);
    await s.f.server.ctx.nodeDirectory.changed(node.nodeId);
    const watch = watchPollHangUps(s.f.server.ctx, 200);
    try {
      const oldPollHungUp = watch.started(node.nodeId);
      watch.started(node.nodeId);
      oldPollHungUp();
      await new Promise((r) => setTimeout(r, 600));
      expect((await s.f.server.ctx.nodeDirectory.serving('svc-llama-3.2-3b')).map((n) => n.id)).toContain(node.nodeId);
      // The check itself still runs for the latest poll: hung up, no call since, taken for gone.
      watch.started(node.nodeId)();
      await eventually(
        async () => !(await s.f.server.ctx.nodeDirectory.serving('svc-llama-3.2-3b')).some((n) => n.id === node.nodeId),
      );
    } finally {
      await watch.close();
    }
  }, 30_000);
});

describe('a long-poll answered in-process (app.inject)', () => {
  const s = withBackup({ SVC_POLL_HANG_UP_GRACE_MS: '500' });
  it('is not a hang-up: the node stays routable', async () => {
    const node = await canadianNode(s.f, 'tinyllama');
    expect(await node.poll()).toEqual([]);
    await new Promise((r) => setTimeout(r, s.f.server.ctx.config.pollHangUpGraceMs + 500));
    expect((await s.f.server.ctx.nodeDirectory.serving('tinyllama')).map((n) => n.id)).toContain(node.nodeId);
  }, 30_000);
});

/** Polls until the node took one item of work (a request routed to it). */
async function eventuallyTaken(node: TestNode): Promise<WorkItem> {
  for (let i = 0; i < 100; i++) {
    const [work] = await node.poll({ waitMs: 200 });
    if (work) return work;
  }
  throw new Error('no work reached the node');
}

/**
 * A signed long-poll of the node over a real connection, once the server is waiting on it
 * (100 ms in); `destroy()` closes the connection without an answer, as a killed process's does.
 */
async function waitingPoll(server: string, node: TestNode): Promise<{ destroy(): void }> {
  const pathWithQuery = '/api/v1/node/work?wait_ms=25000';
  const timestamp = String(Date.now());
  const signature = signHex(requestMessage({ method: 'GET', pathWithQuery, timestamp, body: '' }), node.privateKey);
  const req = httpRequest(`${server}${pathWithQuery}`, {
    headers: {
      [NODE_HEADERS.node]: node.nodeId,
      [NODE_HEADERS.timestamp]: timestamp,
      [NODE_HEADERS.signature]: signature,
    },
  });
  req.on('error', () => undefined);
  req.end();
  await new Promise((r) => setTimeout(r, 100));
  return { destroy: () => req.destroy() };
}

/**
 * A fixture (90 s leases, and `env`) with a US backup node, started once for the tests of the
 * block. Its server does not wait for the requests still held when the block ends (a node never
 * answers them) as it shuts down: 10 s each time by default.
 */
function withBackup(env: Record<string, string> = {}): { f: GatewayFixture; backup: GatewayNode } {
  const s = {} as { f: GatewayFixture; backup: GatewayNode };
  beforeAll(async () => {
    s.f = await startGatewayFixture({ env: { SVC_LEASE_SECONDS: '90', SVC_SHUTDOWN_GRACE_MS: '200', ...env } });
    s.backup = await s.f.addNode({ country: 'US', region: 'us-east' });
  });
  afterAll(() => s.f.close());
  return s;
}

/** A Canadian node of the fixture serving `model`, speaking the protocol by hand. */
function canadianNode(f: GatewayFixture, model: string): Promise<TestNode> {
  return createTestNode(f.server.app, f.operatorKey, { country: 'CA', region: 'ca-central', models: [model] });
}

// Canada first; the US backup only when no Canadian node can answer.
const ask = (model: string, content: string) =>
  ({ model, messages: [{ role: 'user', content }], max_tokens: 8, jurisdiction: 'CA' }) as Params;

/**
 * A Canadian node speaking the channel by hand (so that it can die, or go quiet), holding the
 * request `content` that was pushed to it. `answer` settles when the request ends (some cases end
 * it with the server); `closed` when the channel closed (epoch ms).
 */
async function nodeHolding(
  f: GatewayFixture,
  content: string,
  options: { autoPong?: boolean } = {},
): Promise<{
  node: TestNode;
  ws: WebSocket;
  workId: string;
  answer: Promise<{ data: OpenAI.Chat.ChatCompletion; response: Response }>;
  closed: Promise<number>;
}> {
  const node = await canadianNode(f, 'tinyllama');
  const ws = await openChannel(f.server.url, node.nodeId, node.privateKey, options);
  const closed = new Promise<number>((resolve) => ws.on('close', () => resolve(Date.now())));
  const pushed = new Promise<string>((resolve) =>
    ws.on('message', (data: Buffer) => {
      const m = JSON.parse(data.toString()) as ServerChannelMessage;
      if (m.type === 'work' && m.work[0]) resolve(m.work[0].work_id);
    }),
  );
  // One slot, granted once the heartbeat after it is answered (messages are handled in order).
  const granted = new Promise<void>((resolve) =>
    ws.on('message', (data: Buffer) => {
      if ((JSON.parse(data.toString()) as ServerChannelMessage).type === 'reply') resolve();
    }),
  );
  ws.send(JSON.stringify({ type: 'grant', seq: 1, slots: 1 }));
  ws.send(JSON.stringify({ type: 'heartbeat', seq: 2, body: { active_work: [] } }));
  await granted;
  const answer = f.openai().chat.completions.create(ask('tinyllama', content)).withResponse();
  answer.catch(() => undefined);
  return { node, ws, workId: await pushed, answer, closed };
}

/** The work item's status and the seconds left on its lease. */
async function workLease(db: Queryable, workId: string): Promise<{ status: string; left: number } | undefined> {
  const { rows } = await db.query<{ status: string; left: number }>(
    'SELECT status, extract(epoch FROM lease_expires_at - now())::float8 AS left FROM work_items WHERE id = $1',
    [workId],
  );
  return rows[0];
}

/** Opens the node channel with a signed handshake (docs/node-protocol.md) and waits for its hello. */
async function openChannel(
  server: string,
  nodeId: string,
  privateKey: TestNode['privateKey'],
  options: { autoPong?: boolean },
): Promise<WebSocket> {
  const timestamp = String(Date.now());
  const signature = signHex(
    requestMessage({ method: 'GET', pathWithQuery: NODE_CHANNEL_PATH, timestamp, body: '' }),
    privateKey,
  );
  const ws = new WebSocket(`${server.replace(/^http/, 'ws')}${NODE_CHANNEL_PATH}`, {
    headers: { [NODE_HEADERS.node]: nodeId, [NODE_HEADERS.timestamp]: timestamp, [NODE_HEADERS.signature]: signature },
    autoPong: options.autoPong ?? true,
  });
  await new Promise<void>((resolve, reject) => {
    ws.once('message', () => resolve());
    ws.once('error', reject);
  });
  return ws;
}

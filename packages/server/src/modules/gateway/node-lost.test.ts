import { NODE_CHANNEL_PATH, NODE_HEADERS, requestMessage, signHex, type ServerChannelMessage } from '@svc/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type OpenAI from 'openai';
import WebSocket from 'ws';
import { createTestNode, createTestStore } from '../../../test/harness.js';
import { openDb } from '../../platform/db/index.js';
import {
  eventually,
  startGatewayFixture,
  type GatewayFixture,
  type GatewayNode,
} from '../../../test/gateway-fixture.js';
import { CHANNEL_LOSS_GRACE_SECONDS } from '../work/channel.js';

type Params = OpenAI.Chat.ChatCompletionCreateParamsNonStreaming;

/**
 * A node whose channel drops while it holds a buyer's request (docs/node-protocol.md, "The node
 * channel"): the request's lease ends CHANNEL_LOSS_GRACE_SECONDS later, so a node that died is
 * failed over in seconds rather than after its lease (90 s here); a node still alive reconnects,
 * heartbeats its work at once, and answers the request itself.
 */
describe('a node channel that drops while it holds a request', () => {
  let f: GatewayFixture;
  let backup: GatewayNode;

  beforeAll(async () => {
    f = await startGatewayFixture({ env: { SVC_LEASE_SECONDS: '90' } });
    backup = await f.addNode({ country: 'US', region: 'us-east' });
  });
  afterAll(() => f.close());

  it('of a node that never comes back: the request fails over within seconds', async () => {
    // A node speaking the channel by hand, so that it can die: it takes work and then its
    // connection is cut without a close frame (as the kernel does for a killed process).
    const dead = await createTestNode(f.server.app, f.operatorKey, {
      country: 'CA',
      region: 'ca-central',
      models: ['tinyllama'],
    });
    const ws = await openChannel(f.server.url, dead.nodeId, dead.privateKey);
    const pushed = nextWork(ws);
    await grant(ws);

    const answer = f.openai().chat.completions.create(ask('tinyllama', 'are you there')).withResponse();
    const workId = await pushed;
    const cut = Date.now();
    ws.terminate();

    const { data, response } = await answer;
    const waited = Date.now() - cut;
    expect(response.headers.get('x-svc-node')).toBe(backup.nodeId);
    expect(data.choices[0]?.message.content).toBe('You said: are you there');
    // Grace, then the once-a-second sweep and the request's once-a-second look at its work.
    expect(waited).toBeGreaterThanOrEqual(CHANNEL_LOSS_GRACE_SECONDS * 1000 - 100);
    expect(waited).toBeLessThan((CHANNEL_LOSS_GRACE_SECONDS + 4) * 1000);
    const { rows } = await f.server.ctx.db.query<{ status: string }>('SELECT status FROM work_items WHERE id = $1', [
      workId,
    ]);
    expect(rows[0]?.status).toBe('lost');
  }, 30_000);

  it('of a node that reconnects: it keeps the request and answers it', async () => {
    // Answers after the grace and a sweep have passed; heartbeats only every 30 s (a third of the
    // lease), so only the heartbeat sent on reconnecting can keep the lease.
    const alive = await f.addNode({
      country: 'CA',
      region: 'ca-central',
      upstream: { delayMs: (CHANNEL_LOSS_GRACE_SECONDS + 2) * 1000 },
      timing: { heartbeatMs: 60_000 },
    });
    const answer = f.openai().chat.completions.create(ask('phi-4', 'still here')).withResponse();
    await eventually(() => (alive.upstream?.requests.length ?? 0) > 0);
    // Every channel drops (the server's side cut, as a network failure would), the backup's too.
    for (const client of f.server.app.websocketServer.clients) client.terminate();

    const { data, response } = await answer;
    expect(response.headers.get('x-svc-node')).toBe(alive.nodeId);
    expect(data.choices[0]?.message.content).toBe('You said: still here');
    expect(backup.workEvents()).toHaveLength(1);
    await alive.stop();
  }, 30_000);
});

describe('a node channel that this instance closes as it shuts down', () => {
  it('is not a node lost: the work it holds keeps its lease (the node reconnects elsewhere)', async () => {
    const store = await createTestStore();
    try {
      const f = await startGatewayFixture({ store, env: { SVC_LEASE_SECONDS: '90', SVC_SHUTDOWN_GRACE_MS: '200' } });
      const node = await createTestNode(f.server.app, f.operatorKey, { country: 'CA', models: ['tinyllama'] });
      const ws = await openChannel(f.server.url, node.nodeId, node.privateKey);
      const pushed = nextWork(ws);
      await grant(ws);
      const answer = f
        .openai()
        .chat.completions.create(ask('tinyllama', 'hold on'))
        .catch((err: unknown) => err);
      const workId = await pushed;
      await f.close();
      await answer;
      const db = await openDb(store);
      try {
        const { rows } = await db.query<{ status: string; left: number }>(
          'SELECT status, extract(epoch FROM lease_expires_at - now())::float8 AS left FROM work_items WHERE id = $1',
          [workId],
        );
        expect(rows[0]?.status).toBe('leased');
        expect(rows[0]?.left).toBeGreaterThan(60);
      } finally {
        await db.close();
      }
      ws.terminate();
    } finally {
      await store.drop();
    }
  }, 30_000);
});

// Canada first; the US backup only when no Canadian node can answer. Each case its own model, so
// that the second is not routed to the first one's dead node.
const ask = (model: string, content: string) =>
  ({ model, messages: [{ role: 'user', content }], max_tokens: 8, jurisdiction: 'CA' }) as Params;

/** The work id of the next work pushed down the channel. */
const nextWork = (ws: WebSocket) =>
  new Promise<string>((resolve) =>
    ws.on('message', (data: Buffer) => {
      const m = JSON.parse(data.toString()) as ServerChannelMessage;
      if (m.type === 'work' && m.work[0]) resolve(m.work[0].work_id);
    }),
  );

/** Grants one slot; resolves once it is granted (messages are handled in order: a heartbeat's reply follows it). */
async function grant(ws: WebSocket): Promise<void> {
  ws.send(JSON.stringify({ type: 'grant', seq: 1, slots: 1 }));
  await new Promise<void>((resolve) => {
    ws.on('message', (data: Buffer) => {
      if ((JSON.parse(data.toString()) as ServerChannelMessage).type === 'reply') resolve();
    });
    ws.send(JSON.stringify({ type: 'heartbeat', seq: 2, body: { active_work: [] } }));
  });
}

/** Opens the node channel with a signed handshake (docs/node-protocol.md) and waits for its hello. */
async function openChannel(
  server: string,
  nodeId: string,
  privateKey: Parameters<typeof signHex>[1],
): Promise<WebSocket> {
  const timestamp = String(Date.now());
  const signature = signHex(
    requestMessage({ method: 'GET', pathWithQuery: NODE_CHANNEL_PATH, timestamp, body: '' }),
    privateKey,
  );
  const ws = new WebSocket(`${server.replace(/^http/, 'ws')}${NODE_CHANNEL_PATH}`, {
    headers: { [NODE_HEADERS.node]: nodeId, [NODE_HEADERS.timestamp]: timestamp, [NODE_HEADERS.signature]: signature },
  });
  await new Promise<void>((resolve, reject) => {
    ws.once('message', () => resolve());
    ws.once('error', reject);
  });
  return ws;
}

import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { NODE_CHANNEL_PATH, NODE_HEADERS, requestMessage, signHex } from '@svc/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import {
  bearer,
  createKey,
  createTestStore,
  signUp,
  startTestServer,
  TEST_STORE_KIND,
  type TestBuyer,
} from '@svc/server/testing';
import type { AgentEvent } from '../src/work.js';
import { channelUrl } from '../src/channel.js';
import { loadOrCreateIdentity } from '../src/identity.js';
import { createFakeEngine } from './fake-engine.js';
import { cleanupAgents, makeAgent, type TestAgent } from './helpers.js';

type Server = Awaited<ReturnType<typeof startTestServer>>;

/** Opens a raw WebSocket to the channel with these headers: its first message, or the HTTP status that refused it. */
function handshake(
  url: string,
  headers: Record<string, string>,
): Promise<{ status: number; first?: Record<string, unknown>; ws?: WebSocket }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(channelUrl(url, NODE_CHANNEL_PATH), { headers });
    ws.once('unexpected-response', (_req, res) => {
      res.resume();
      resolve({ status: res.statusCode ?? 0 });
      ws.terminate();
    });
    ws.once('message', (data: WebSocket.RawData) =>
      resolve({ status: 101, first: JSON.parse(data.toString()) as Record<string, unknown>, ws }),
    );
    ws.once('error', (err) => {
      if (!/Unexpected server response/.test(err.message)) reject(err);
    });
  });
}

function nextMessage(ws: WebSocket): Promise<Record<string, unknown>> {
  return new Promise((resolve) =>
    ws.once('message', (data: WebSocket.RawData) => resolve(JSON.parse(data.toString()) as Record<string, unknown>)),
  );
}

describe('the node channel against the real server', () => {
  let server: Server;
  let buyer: TestBuyer;
  let operatorKey: string;
  let node: TestAgent;
  const httpCalls: string[] = [];
  const recordingFetch: typeof fetch = (input, init) => {
    httpCalls.push(
      `${init?.method ?? 'GET'} ${new URL(input instanceof Request ? input.url : String(input)).pathname}`,
    );
    return fetch(input, init);
  };

  beforeAll(async () => {
    server = await startTestServer();
    buyer = await signUp(server.app);
    operatorKey = await createKey(server.app, buyer, ['operator']);
    node = await makeAgent(
      { url: server.url, apiKey: operatorKey },
      { engines: new Map([['tinyllama', createFakeEngine({ models: ['tinyllama'] })]]), fetch: recordingFetch },
    );
    await node.agent.start();
  });
  afterAll(async () => {
    await cleanupAgents();
    await server.stop();
  });

  it('refuses a handshake without the node headers, with a bad signature, or replayed; opens a signed one', async () => {
    const nodeId = node.agent.nodeId ?? '';
    const identity = await loadOrCreateIdentity(node.dataDir);
    const signed = (timestamp: string) =>
      signHex(
        requestMessage({ method: 'GET', pathWithQuery: NODE_CHANNEL_PATH, timestamp, body: '' }),
        identity.privateKey,
      );

    expect((await handshake(server.url, {})).status).toBe(401);
    const now = String(Date.now());
    const other = await loadOrCreateIdentity(`${node.dataDir}-other`);
    const forged = signHex(
      requestMessage({ method: 'GET', pathWithQuery: NODE_CHANNEL_PATH, timestamp: now, body: '' }),
      other.privateKey,
    );
    expect(
      (
        await handshake(server.url, {
          [NODE_HEADERS.node]: nodeId,
          [NODE_HEADERS.timestamp]: now,
          [NODE_HEADERS.signature]: forged,
        })
      ).status,
    ).toBe(401);
    const stale = String(Date.now() - 120_000);
    expect(
      (
        await handshake(server.url, {
          [NODE_HEADERS.node]: nodeId,
          [NODE_HEADERS.timestamp]: stale,
          [NODE_HEADERS.signature]: signed(stale),
        })
      ).status,
    ).toBe(401);

    const good = { [NODE_HEADERS.node]: nodeId, [NODE_HEADERS.timestamp]: now, [NODE_HEADERS.signature]: signed(now) };
    const opened = await handshake(server.url, good);
    expect(opened.status).toBe(101);
    expect(opened.first).toMatchObject({ type: 'hello', seq: 1, node_id: nodeId });
    // The same signed handshake again is a replay.
    expect((await handshake(server.url, good)).status).toBe(401);

    // A message whose seq does not increase closes the channel (1008); a plain GET is a 400.
    const ws = opened.ws;
    if (!ws) throw new Error('no socket');
    ws.send(JSON.stringify({ type: 'heartbeat', seq: 5, body: { load: 0 } }));
    expect(await nextMessage(ws)).toMatchObject({ type: 'reply', re: 5, ok: true, body: { cancel: [] } });
    const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
    ws.send(JSON.stringify({ type: 'heartbeat', seq: 5, body: { load: 0 } }));
    expect(await closed).toBe(1008);
    const plain = await fetch(`${server.url}${NODE_CHANNEL_PATH}`);
    expect(plain.status).toBe(401);
  });

  it('serves plain and streamed chat through the channel: no long-poll, no receipt or events call over HTTP', async () => {
    httpCalls.length = 0;
    const chat = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { ...bearer(buyer.apiKey), 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'tinyllama', messages: [{ role: 'user', content: 'over the channel' }] }),
    });
    const body = (await chat.json()) as { choices: { message: { content: string } }[]; svc_receipt_id: string };
    expect(chat.status).toBe(200);
    expect(body.choices[0]?.message.content).toBe('echo:over the channel');
    expect(body.svc_receipt_id).toMatch(/^rcpt_/);

    const streamed = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { ...bearer(buyer.apiKey), 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'tinyllama',
        stream: true,
        messages: [{ role: 'user', content: 'streamed over the channel' }],
      }),
    });
    const text = await streamed.text();
    expect(streamed.status).toBe(200);
    const chunks = text
      .split('\n\n')
      .filter((l) => l.startsWith('data: {'))
      .map((l) => JSON.parse(l.slice(6)) as { choices: { delta: { content?: string } }[]; svc_receipt_id?: string });
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe('echo:streamed over the channel');
    expect(chunks.at(-1)?.svc_receipt_id).toMatch(/^rcpt_/);
    expect(text.trimEnd().endsWith('data: [DONE]')).toBe(true);

    // Both receipts are stored, and the agent's outbox is empty (each was acknowledged).
    for (const id of [(body as unknown as { id: string }).id]) {
      const res = await fetch(`${server.url}/api/v1/job/receipts/${id}`, { headers: bearer(buyer.apiKey) });
      expect(((await res.json()) as { receipts: unknown[] }).receipts).toHaveLength(1);
    }
    expect(httpCalls.filter((c) => /\/node\/(work|receipt)/.test(c))).toEqual([]);
  });

  it('acknowledges a receipt sent again after it was applied, once per work id', async () => {
    const chat = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { ...bearer(buyer.apiKey), 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'tinyllama', messages: [{ role: 'user', content: 'once' }] }),
    });
    const { id } = (await chat.json()) as { id: string };
    // The receipt's records follow the answer (the group-commit writer); this reads the store directly.
    await server.ctx.writer.settled();
    const { rows } = await server.ctx.db.query<{
      work_id: string;
      job_id: string;
      node_public_key: string;
      result_hash: string;
      signature: string;
      metering_units: string;
    }>(
      'SELECT work_id, job_id, node_public_key, result_hash, signature, metering_units FROM receipts WHERE job_id = $1',
      [id],
    );
    const stored = rows[0];
    if (!stored) throw new Error('no receipt stored');
    const receipt = {
      job_id: stored.job_id,
      pubkey: stored.node_public_key,
      result_hash: stored.result_hash,
      signature: stored.signature,
      metering_units: Number(stored.metering_units),
    };

    const identity = await loadOrCreateIdentity(node.dataDir);
    const timestamp = String(Date.now());
    const signature = signHex(
      requestMessage({ method: 'GET', pathWithQuery: NODE_CHANNEL_PATH, timestamp, body: '' }),
      identity.privateKey,
    );
    const { ws } = await handshake(server.url, {
      [NODE_HEADERS.node]: node.agent.nodeId ?? '',
      [NODE_HEADERS.timestamp]: timestamp,
      [NODE_HEADERS.signature]: signature,
    });
    if (!ws) throw new Error('no socket');
    ws.send(JSON.stringify({ type: 'receipt', seq: 1, work_id: stored.work_id, receipt }));
    expect(await nextMessage(ws)).toMatchObject({ type: 'ack', re: 1, work_ids: [stored.work_id] });
    // Another node's work id with this receipt is not acknowledged: the work is not this node's.
    ws.send(JSON.stringify({ type: 'receipt', seq: 2, work_id: 'wrk_00000000000000000000000000', receipt }));
    expect(await nextMessage(ws)).toMatchObject({
      type: 'reply',
      re: 2,
      ok: false,
      error: { code: 409, error: 'conflict' },
    });
    ws.close();
    const receipts = await server.ctx.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM receipts WHERE job_id = $1',
      [id],
    );
    expect(receipts.rows[0]?.n).toBe(1);
  });
  it('after the channel drops, the agent reconnects and sends its outbox again; an applied receipt is acknowledged, not rejected', async () => {
    const chat = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { ...bearer(buyer.apiKey), 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'tinyllama', messages: [{ role: 'user', content: 'resend me' }] }),
    });
    const { id } = (await chat.json()) as { id: string };
    // The receipt's records follow the answer (the group-commit writer); this reads the store directly.
    await server.ctx.writer.settled();
    const { rows } = await server.ctx.db.query<{
      work_id: string;
      job_id: string;
      node_public_key: string;
      result_hash: string;
      signature: string;
      metering_units: string;
      metadata: Record<string, unknown>;
    }>(
      'SELECT work_id, job_id, node_public_key, result_hash, signature, metering_units, metadata FROM receipts WHERE job_id = $1',
      [id],
    );
    const stored = rows[0];
    if (!stored) throw new Error('no receipt stored');
    // A small result is kept in its work item's row (server modules/work/results.ts).
    const { rows: results } = await server.ctx.db.query<{ result_inline: Uint8Array | null }>(
      'SELECT result_inline FROM work_items WHERE id = $1',
      [stored.work_id],
    );
    const inline = results[0]?.result_inline;
    if (!inline) throw new Error('no result stored');
    const blob = { bytes: Buffer.from(inline) };
    // The agent's own delivery is over (acknowledged, its outbox entry removed) before the test puts one back.
    for (
      const deadline = Date.now() + 10_000;
      !node.workEvents().some((e) => e.work_id === stored.work_id) && Date.now() < deadline;
    )
      await new Promise((r) => setTimeout(r, 20));
    expect(node.workEvents().find((e) => e.work_id === stored.work_id)?.outcome).toBe('completed');
    // As if the node had not seen the ack before the channel dropped: the entry is still in its outbox.
    const entry = {
      work_id: stored.work_id,
      job_id: stored.job_id,
      output: blob.bytes.toString('utf8'),
      encoding: 'utf8',
      content_type: 'application/json',
      result_hash: stored.result_hash,
      metering_units: Number(stored.metering_units),
      usage: {},
      receipt: {
        job_id: stored.job_id,
        pubkey: stored.node_public_key,
        result_hash: stored.result_hash,
        signature: stored.signature,
        metering_units: Number(stored.metering_units),
        metadata: { engine: 'fake', duration_ms: 1 },
      },
    };
    const file = join(node.dataDir, 'outbox', `${stored.work_id}.json`);
    await mkdir(join(node.dataDir, 'outbox'), { recursive: true });
    await writeFile(file, JSON.stringify(entry));
    const opened = () => server.logs.lines.filter((l) => l.includes('node channel opened')).length;
    const before = opened();
    for (const socket of server.app.websocketServer.clients) socket.terminate();
    for (const deadline = Date.now() + 20_000; existsSync(file) && Date.now() < deadline;)
      await new Promise((r) => setTimeout(r, 50));
    expect(existsSync(file)).toBe(false);
    expect(existsSync(join(node.dataDir, 'outbox', 'rejected', `${stored.work_id}.json`))).toBe(false);
    expect(opened()).toBeGreaterThan(before);
    const receipts = await server.ctx.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM receipts WHERE job_id = $1',
      [id],
    );
    expect(receipts.rows[0]?.n).toBe(1);
  });
});

describe('a receipt that failed while the server was away', () => {
  it('goes again as soon as the channel reopens, not after its upload backoff', async () => {
    const server = await startTestServer();
    try {
      const buyer = await signUp(server.app);
      const operatorKey = await createKey(server.app, buyer, ['operator']);
      // The server "away": HTTP calls fail as if nothing answered, and channel connections are closed at once.
      let away = false;
      const engine = createFakeEngine({ models: ['tinyllama'], delayMs: 800 });
      const t = await makeAgent(
        { url: server.url, apiKey: operatorKey },
        {
          engines: new Map([['tinyllama', engine]]),
          fetch: (input, init) => (away ? Promise.reject(new TypeError('fetch failed')) : fetch(input, init)),
          // A failed upload waits almost a minute before its next attempt, within its deadline.
          timing: { uploadBackoff: { baseMs: 60_000, capMs: 60_000, random: () => 0.99 }, uploadDeadlineMs: 120_000 },
        },
      );
      await t.agent.start();
      server.app.websocketServer.on('connection', (socket) => {
        if (away) socket.terminate();
      });
      const chat = fetch(`${server.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { ...bearer(buyer.apiKey), 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'tinyllama', messages: [{ role: 'user', content: 'while away' }] }),
      }).catch(() => undefined);
      // The work reaches the node, then the server goes away while the engine runs.
      for (const deadline = Date.now() + 10_000; engine.inFlight === 0 && Date.now() < deadline;)
        await new Promise((r) => setTimeout(r, 5));
      expect(engine.inFlight).toBe(1);
      away = true;
      for (const socket of server.app.websocketServer.clients) socket.terminate();
      const retrying = () =>
        t.events.find(
          (e): e is Extract<AgentEvent, { event: 'warning' }> =>
            e.event === 'warning' && /upload failed .*retrying in \d+ ms/.test(e.message),
        );
      for (const deadline = Date.now() + 10_000; !retrying() && Date.now() < deadline;)
        await new Promise((r) => setTimeout(r, 10));
      expect(retrying()?.message).toMatch(/retrying in 59\d{3} ms/);
      const workId = retrying()?.work_id;
      // The server is back: the channel reconnects (its own backoff is at most 10 s) and the receipt goes at once.
      const back = Date.now();
      away = false;
      for (
        const deadline = Date.now() + 20_000;
        !t.workEvents().some((e) => e.work_id === workId && e.outcome === 'completed') && Date.now() < deadline;
      )
        await new Promise((r) => setTimeout(r, 20));
      expect(t.workEvents().find((e) => e.work_id === workId)?.outcome).toBe('completed');
      expect(Date.now() - back).toBeLessThan(20_000);
      await server.ctx.writer.settled();
      const { rows } = await server.ctx.db.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM receipts WHERE work_id = $1',
        [workId],
      );
      expect(rows[0]?.n).toBe(1);
      await chat;
      await t.cleanup();
    } finally {
      await server.stop();
    }
  }, 90_000);
});

if (TEST_STORE_KIND === 'pglite')
  console.log('[svc test] SKIPPED the two-instance channel test: PGlite is one process, one instance');

describe.skipIf(TEST_STORE_KIND === 'pglite')('the node channel across two instances on one PostgreSQL', () => {
  it('a node connected to instance A serves a request routed by instance B (plain and streamed)', async () => {
    const store = await createTestStore();
    const a = await startTestServer({ store });
    const b = await startTestServer({ store });
    try {
      const buyer = await signUp(b.app);
      const operatorKey = await createKey(a.app, buyer, ['operator']);
      const httpCalls: string[] = [];
      const t = await makeAgent(
        { url: a.url, apiKey: operatorKey },
        {
          engines: new Map([['tinyllama', createFakeEngine({ models: ['tinyllama'] })]]),
          fetch: (input, init) => {
            httpCalls.push(new URL(input instanceof Request ? input.url : String(input)).pathname);
            return fetch(input, init);
          },
        },
      );
      await t.agent.start();
      const ask = (stream: boolean) =>
        fetch(`${b.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { ...bearer(buyer.apiKey), 'content-type': 'application/json' },
          body: JSON.stringify({
            model: 'tinyllama',
            stream,
            messages: [{ role: 'user', content: `via B ${stream}` }],
          }),
        });
      const plain = await ask(false);
      expect(plain.status).toBe(200);
      expect(
        ((await plain.json()) as { choices: { message: { content: string } }[] }).choices[0]?.message.content,
      ).toBe('echo:via B false');
      const streamed = await ask(true);
      const text = await streamed.text();
      expect(streamed.status).toBe(200);
      const content = text
        .split('\n\n')
        .filter((l) => l.startsWith('data: {'))
        .map(
          (l) =>
            (JSON.parse(l.slice(6)) as { choices: { delta: { content?: string } }[] }).choices[0]?.delta.content ?? '',
        )
        .join('');
      expect(content).toBe('echo:via B true');
      expect(httpCalls.filter((p) => /\/node\/(work|receipt)/.test(p))).toEqual([]);
      await t.cleanup();
    } finally {
      await b.stop();
      await a.stop();
      await store.drop();
    }
  }, 120_000);
});

import type { ServerChannelMessage } from '@svc/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  bearer,
  createKey,
  createTestApp,
  createTestNode,
  eventually,
  signUp,
  type TestApp,
  type TestBuyer,
  type TestNode,
} from '../../../test/harness.js';
import { findNode } from '../nodes/store.js';
import type { WorkRow } from '../work/store.js';
import { openChannel, type ChannelConnection } from './channel.js';

type WorkMessage = Extract<ServerChannelMessage, { type: 'work' }>;

/** A socket that records what the server sends; `failSends` makes writes fail as on a dropped connection. */
function fakeSocket() {
  const sent: ServerChannelMessage[] = [];
  const socket = {
    readyState: 1,
    failSends: false,
    send(data: string, done?: (err?: Error) => void) {
      if (socket.failSends) {
        queueMicrotask(() => done?.(new Error('the connection dropped')));
        return;
      }
      sent.push(JSON.parse(data) as ServerChannelMessage);
      queueMicrotask(() => done?.());
    },
    close() {
      socket.readyState = 3;
    },
  };
  const work = () => sent.filter((m): m is WorkMessage => m.type === 'work');
  // The TCP socket under a `ws` WebSocket: what is corked and written when.
  const writes: string[] = [];
  Object.assign(socket, {
    _socket: { destroyed: false, cork: () => writes.push('cork'), uncork: () => writes.push('uncork') },
  });
  const send = socket.send.bind(socket);
  socket.send = (data: string, done?: (err?: Error) => void) => {
    writes.push((JSON.parse(data) as ServerChannelMessage).type);
    send(data, done);
  };
  return { socket, sent, work, writes };
}

describe('standing slots on the node channel: work pushed at once, never past the grant', () => {
  let t: TestApp;
  let buyer: TestBuyer;
  let operatorKey: string;
  let seq = 0;
  const open: ChannelConnection[] = [];

  beforeAll(async () => {
    t = await createTestApp();
    buyer = await signUp(t.app);
    operatorKey = await createKey(t.app, buyer, ['operator']);
  });
  afterAll(async () => {
    for (const c of open) c.close();
    await t.close();
  });

  /** A registered node serving only `model` (so each test routes to its own node) and its channel. */
  async function nodeWithChannel(model: string, existing?: TestNode, info: Record<string, unknown> = {}) {
    const node =
      existing ?? (await createTestNode(t.app, operatorKey, { models: [model], max_concurrency: 8, ...info }));
    const row = await findNode(t.ctx.db, node.nodeId);
    if (!row) throw new Error('node not stored');
    const fake = fakeSocket();
    const conn = openChannel(t.ctx, row, fake.socket);
    open.push(conn);
    const say = (message: Record<string, unknown>) => {
      const m = { ...message, seq: ++seq };
      conn.receive(JSON.stringify(m));
      return m.seq;
    };
    return { node, conn, say, ...fake };
  }

  const chat = (model: string) =>
    t.app.inject({
      method: 'POST',
      url: '/v1/chat/completions',
      headers: bearer(buyer.apiKey),
      payload: { model, messages: [{ role: 'user', content: 'push it' }], max_tokens: 8 },
    });

  /** Work rows of `node`: how many, and how many wait in the store (leased, not handed out). */
  async function stored(node: TestNode) {
    const { rows } = await t.ctx.db.query<{ total: number; waiting: number }>(
      `SELECT count(*)::int AS total, count(*) FILTER (WHERE status = 'leased' AND dispatched_at IS NULL)::int AS waiting
         FROM work_items WHERE node_id = $1`,
      [node.nodeId],
    );
    return rows[0] ?? { total: 0, waiting: 0 };
  }

  /** Submits a kind 1 job that only a node in `country` may take; its id. */
  async function submitJob(country: string) {
    const res = await t.app.inject({
      method: 'POST',
      url: '/api/v1/marketplace/jobs',
      headers: bearer(buyer.apiKey),
      payload: {
        kind: 1,
        budget: 0.05,
        max_price_per_unit: 0.00001,
        currency: 'CAD',
        inline_text: 'hi',
        strict_jurisdiction: country,
      },
    });
    expect(res.statusCode).toBe(201);
    return (res.json() as { job_id: string }).job_id;
  }

  /** Ends each request with a final failure over the channel; the buyer gets 502. */
  const failAll = (say: (m: Record<string, unknown>) => number, items: { work_id: string }[]) => {
    for (const item of items) say({ type: 'fail', work_id: item.work_id, message: 'test over', retryable: false });
  };

  it('writes the frames it sends in one tick to the socket at once (corked until the next tick)', async () => {
    const c = await nodeWithChannel('nomic-embed-text');
    await new Promise((resolve) => setImmediate(resolve));
    expect(c.writes).toEqual(['cork', 'hello', 'uncork']);
    c.writes.length = 0;
    // Three messages in one tick, each answered at once: the second and third grants pass the limit.
    c.say({ type: 'grant', slots: 64 });
    c.say({ type: 'grant', slots: 64 });
    c.say({ type: 'grant', slots: 64 });
    await new Promise((resolve) => setImmediate(resolve));
    expect(c.writes).toEqual(['cork', 'reply', 'reply', 'uncork']);
    c.conn.close();
  });

  it('pushes work on granted slots with no pull waiting, one slot per item, and the rest waits in the store until a slot is granted again', async () => {
    const c = await nodeWithChannel('tinyllama');
    expect(c.sent[0]).toMatchObject({ type: 'hello', node_id: c.node.nodeId, grants: true });
    const grant = c.say({ type: 'grant', slots: 2 });
    const answers = [chat('tinyllama'), chat('tinyllama'), chat('tinyllama')];
    await eventually(async () => (await stored(c.node)).total === 3);
    await eventually(() => c.work().length === 2);
    // Pushed at once, before the opening was stored (the ticket says so), drawing on the grant.
    for (const m of c.work()) {
      expect(m.re).toBe(grant);
      expect(m.work).toHaveLength(1);
      expect(m.work[0]?.ticket?.node_id).toBe(c.node.nodeId);
    }
    // Two slots granted: the third request waits in the store, and nothing more is pushed.
    await eventually(async () => (await stored(c.node)).waiting === 1);
    expect(c.work()).toHaveLength(2);

    // A slot freed and granted again: the waiting work is taken from the store and pushed.
    const again = c.say({ type: 'grant', slots: 1 });
    await eventually(() => c.work().length === 3);
    const third = c.work()[2];
    expect(third?.re).toBe(again);
    expect(third?.work).toHaveLength(1);
    expect((await stored(c.node)).waiting).toBe(0);

    // Past 64 granted slots at once is refused, and grants nothing.
    c.say({ type: 'grant', slots: 60 });
    const tooMany = c.say({ type: 'grant', slots: 5 });
    await eventually(() => c.sent.some((m) => m.type === 'reply' && m.re === tooMany));
    expect(c.sent.find((m) => m.type === 'reply' && m.re === tooMany)).toMatchObject({
      ok: false,
      error: { code: 400, error: 'invalid_request' },
    });

    failAll(
      c.say,
      c.work().flatMap((m) => m.work),
    );
    expect((await Promise.all(answers)).map((r) => r.statusCode)).toEqual([502, 502, 502]);
  }, 60_000);

  it('an agent that only pulls works as before: one pull, one work message; work waits in the store for the next pull', async () => {
    const c = await nodeWithChannel('phi-4');
    const pull = c.say({ type: 'pull', max: 1 });
    const first = chat('phi-4');
    await eventually(() => c.work().length === 1);
    expect(c.work()[0]?.re).toBe(pull);
    const second = chat('phi-4');
    await eventually(async () => (await stored(c.node)).waiting === 1);
    expect(c.work()).toHaveLength(1);
    const next = c.say({ type: 'pull', max: 1 });
    await eventually(() => c.work().length === 2);
    expect(c.work()[1]?.re).toBe(next);
    failAll(
      c.say,
      c.work().flatMap((m) => m.work),
    );
    expect((await first).statusCode).toBe(502);
    expect((await second).statusCode).toBe(502);
  }, 60_000);

  it('a job submitted while the node has a free slot is assigned to it and pushed at once', async () => {
    const c = await nodeWithChannel('tinyllama', undefined, { country: 'IS' });
    const grant = c.say({ type: 'grant', slots: 1 });
    const jobId = await submitJob('IS');
    await eventually(() => c.work().length === 1);
    expect(c.work()[0]).toMatchObject({ re: grant, work: [{ job_id: jobId, type: 'job' }] });
    failAll(c.say, c.work()[0]?.work ?? []);
  }, 60_000);

  it('a job signalled while the only free slot was reserved by a hand-over is pushed once that hand-over is released', async () => {
    const c = await nodeWithChannel('tinyllama', undefined, { country: 'MT' });
    c.say({ type: 'grant', slots: 1 });
    // The grant's look found nothing to claim.
    await eventually(async () => (await stored(c.node)).total === 0);
    await new Promise((resolve) => setTimeout(resolve, 100));
    // A hand-over under way (a submission or a signalled job whose transaction finds the node full
    // in the store) holds the one free slot.
    const handoff = t.ctx.jobSignal.reserve(c.node.nodeId);
    expect(handoff).toBeDefined();
    const heard = t.ctx.jobSignal.generation();
    const jobId = await submitJob('MT');
    // Its message found no free slot: the job waits in the store.
    await eventually(() => t.ctx.jobSignal.generation() > heard);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(c.work()).toHaveLength(0);
    // Released, the slot looks in the store at once (before: only the 25 s look-again timer did).
    handoff?.release();
    await eventually(() => c.work().length === 1, 3_000);
    expect(c.work()[0]?.work).toMatchObject([{ job_id: jobId, type: 'job' }]);
    failAll(c.say, c.work()[0]?.work ?? []);
  }, 60_000);

  it('work pushed but never written to the socket, or handed over as the channel closes, goes back to the store for the next poll', async () => {
    const c = await nodeWithChannel('svc-llama-3.2-3b');
    c.say({ type: 'grant', slots: 2 });
    c.socket.failSends = true;
    const lost = chat('svc-llama-3.2-3b');
    // Sent on a slot, the write failed: the work is no longer dispatched, and a poll gets it.
    await eventually(async () => {
      const s = await stored(c.node);
      return s.total === 1 && s.waiting === 1;
    });
    expect(c.work()).toHaveLength(0);
    const [polled] = await c.node.poll({ waitMs: 0 });
    expect(polled?.job_id).toMatch(/^chatcmpl-/);
    const failed = await c.node.call('POST', `/api/v1/node/work/${polled?.work_id ?? ''}/fail`, {
      message: 'test over',
      retryable: false,
    });
    expect(failed.statusCode).toBe(200);
    expect((await lost).statusCode).toBe(502);

    // The failed write closed that channel: it stands no more.
    expect(t.ctx.jobSignal.reserve(c.node.nodeId)).toBeUndefined();

    // A hand-over that reserved a slot and delivers after the channel closed is refused: its
    // caller stores the work undispatched (gateway/service.ts `sendWork`).
    const d = await nodeWithChannel('svc-llama-3.2-3b', c.node);
    d.say({ type: 'grant', slots: 1 });
    const handoff = t.ctx.jobSignal.reserve(c.node.nodeId);
    expect(handoff).toBeDefined();
    d.conn.close();
    expect(handoff?.deliver([{ id: 'wrk_x' } as WorkRow])).toBe(false);
    expect(t.ctx.jobSignal.reserve(c.node.nodeId)).toBeUndefined();
    const later = chat('svc-llama-3.2-3b');
    await eventually(async () => (await stored(c.node)).waiting === 1);
    expect(d.work()).toHaveLength(0);
    const [taken] = await c.node.poll({ waitMs: 0 });
    await c.node.call('POST', `/api/v1/node/work/${taken?.work_id ?? ''}/fail`, {
      message: 'test over',
      retryable: false,
    });
    expect((await later).statusCode).toBe(502);
  }, 60_000);
});

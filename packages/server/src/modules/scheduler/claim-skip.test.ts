import type { IncomingMessage, ServerResponse } from 'node:http';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  bearer,
  createKey,
  createTestApp,
  createTestNode,
  eventually,
  signUp,
  watchPolls,
  type TestApp,
  type TestBuyer,
  type TestNode,
} from '../../../test/harness.js';
import { sendWork } from '../gateway/service.js';
import { insertLeasedWork, type WorkRow } from '../work/store.js';
import { startGatewayFixture } from '../../../test/gateway-fixture.js';
import { onTransactionStatements } from '../../../test/transaction-spy.js';
import { CLAIM_RECHECK_MS, createJobSignal } from '../work/waiters.js';

describe("a node's re-poll skips the job claim while nothing was signalled", () => {
  it('skips after an empty claim until a job message (not a node: wake-up) or the recheck interval', async () => {
    let deliver: (payload: string) => void = () => undefined;
    const bus = {
      publish: async () => undefined,
      subscribe: async (_: string, handler: (p: string) => void) => ((deliver = handler), async () => undefined),
    };
    const { signal, close } = await createJobSignal({
      bus,
      db: { query: async () => ({ rows: [], rowCount: 0 }) } as never,
    });
    expect(signal.shouldClaim('nd_1')).toBe(true);
    signal.nothingToClaim('nd_1', signal.generation());
    expect(signal.shouldClaim('nd_1')).toBe(false);
    expect(signal.shouldClaim('nd_2')).toBe(true);
    deliver('node:nd_1');
    expect(signal.shouldClaim('nd_1')).toBe(false);
    deliver('requeued');
    expect(signal.shouldClaim('nd_1')).toBe(true);
    // A message heard while the claim ran: the claim's own generation is stale, so the next poll claims.
    const before = signal.generation();
    deliver('job_2');
    signal.nothingToClaim('nd_1', before);
    expect(signal.shouldClaim('nd_1')).toBe(true);
    signal.nothingToClaim('nd_1', signal.generation());
    const now = Date.now();
    vi.spyOn(Date, 'now').mockReturnValue(now + CLAIM_RECHECK_MS);
    expect(signal.shouldClaim('nd_1')).toBe(true);
    vi.restoreAllMocks();
    await close();
  });

  it("skips the take of leased work after one that left none, until the node's own message or the recheck interval", async () => {
    let deliver: (payload: string) => void = () => undefined;
    const bus = {
      publish: async () => undefined,
      subscribe: async (_: string, handler: (p: string) => void) => ((deliver = handler), async () => undefined),
    };
    const { signal, close } = await createJobSignal({
      bus,
      db: { query: async () => ({ rows: [], rowCount: 0 }) } as never,
    });
    expect(signal.shouldTakeLeased('nd_1')).toBe(true);
    signal.leasedDrained('nd_1', signal.leasedGeneration('nd_1'));
    expect(signal.shouldTakeLeased('nd_1')).toBe(false);
    expect(signal.shouldTakeLeased('nd_2')).toBe(true);
    // Job messages and other nodes' messages do not concern its leased work.
    deliver('job_1');
    deliver('node:nd_2');
    expect(signal.shouldTakeLeased('nd_1')).toBe(false);
    deliver('node:nd_1');
    expect(signal.shouldTakeLeased('nd_1')).toBe(true);
    // Its message heard while the take ran: the take's generation is stale, so the next poll takes.
    const before = signal.leasedGeneration('nd_1');
    deliver('node:nd_1');
    signal.leasedDrained('nd_1', before);
    expect(signal.shouldTakeLeased('nd_1')).toBe(true);
    signal.leasedDrained('nd_1', signal.leasedGeneration('nd_1'));
    const now = Date.now();
    vi.spyOn(Date, 'now').mockReturnValue(now + CLAIM_RECHECK_MS);
    expect(signal.shouldTakeLeased('nd_1')).toBe(true);
    vi.restoreAllMocks();
    await close();
  });
});

describe('claim skipping with a real server', () => {
  let t: TestApp;
  let buyer: TestBuyer;
  let node: TestNode;
  beforeAll(async () => {
    t = await createTestApp();
    buyer = await signUp(t.app);
    node = await createTestNode(t.app, await createKey(t.app, await signUp(t.app), ['operator']));
  });
  afterAll(() => t.close());
  afterEach(() => vi.restoreAllMocks());

  it('a waiting poll after an empty claim runs no claim; a submitted job still reaches it at once', async () => {
    expect(await node.poll({ waitMs: 0 })).toEqual([]);
    // A claim is a transaction that first counts the node's open work (the lease sweeper's, every second, is not).
    const claims: string[] = [];
    onTransactionStatements(t.ctx.db, (sql) => {
      if (sql.includes('FROM work_items WHERE node_id = $1')) claims.push(sql);
    });
    expect(await node.poll({ waitMs: 50 })).toEqual([]);
    expect(claims).toEqual([]);
    const polls = watchPolls(t.ctx);
    const waiting = node.poll({ waitMs: 10_000 });
    await polls.until(1);
    const submitted = await t.app.inject({
      method: 'POST',
      url: '/api/v1/marketplace/jobs',
      headers: bearer(buyer.apiKey),
      payload: { kind: 1, budget: 1, max_price_per_unit: 0.00001, currency: 'CAD', inline_text: 'hi' },
    });
    const [work] = await waiting;
    expect(work?.job_id).toBe(submitted.json().job_id);
  });

  it('a waiting poll after a take that left nothing runs no take; gateway work leased to the node still reaches it at once', async () => {
    expect(await node.poll({ waitMs: 0 })).toEqual([]);
    const queries = vi.spyOn(t.ctx.db, 'query');
    expect(await node.poll({ waitMs: 50 })).toEqual([]);
    expect(queries.mock.calls.filter(([sql]) => sql.includes('dispatched_at'))).toEqual([]);
    vi.restoreAllMocks();
    const polls = watchPolls(t.ctx);
    const waiting = node.poll({ waitMs: 10_000 });
    await polls.until(1);
    // What the gateway does: the work is leased to the node, then its message is sent.
    const org =
      (await t.ctx.db.query<{ org_id: string }>('SELECT org_id FROM nodes WHERE id = $1', [node.nodeId])).rows[0]
        ?.org_id ?? '';
    await insertLeasedWork(t.ctx.db, {
      id: 'wrk_leased1',
      owner_id: 'chatcmpl-leased1',
      org_id: org,
      node_id: node.nodeId,
      type: 'chat',
      model: 'tinyllama',
      payload: {},
      stream: false,
      lease_seconds: 30,
    });
    await t.ctx.bus.publish('jobs', `node:${node.nodeId}`);
    const [work] = await waiting;
    expect(work?.work_id).toBe('wrk_leased1');
  });

  it('work written dispatched for a poll that hung up before the hand-over goes back to the next poll', async () => {
    const org =
      (await t.ctx.db.query<{ org_id: string }>('SELECT org_id FROM nodes WHERE id = $1', [node.nodeId])).rows[0]
        ?.org_id ?? '';
    const hangUp = new AbortController();
    const waiting = t.ctx.jobSignal.wait({ id: node.nodeId } as never, 10_000, hangUp.signal);
    const handoff = t.ctx.jobSignal.reserve(node.nodeId);
    expect(handoff).toBeDefined();
    const row = await insertLeasedWork(t.ctx.db, {
      id: 'wrk_hungup1',
      owner_id: 'chatcmpl-hungup1',
      org_id: org,
      node_id: node.nodeId,
      type: 'chat',
      model: 'tinyllama',
      payload: {},
      stream: false,
      lease_seconds: 30,
      dispatched: true,
    });
    expect(
      (await t.ctx.db.query('SELECT dispatched_at IS NOT NULL AS sent FROM work_items WHERE id = $1', ['wrk_hungup1']))
        .rows,
    ).toEqual([{ sent: true }]);
    hangUp.abort();
    await sendWork(t.ctx, row, handoff);
    expect(await waiting).toBeUndefined();
    expect((await t.ctx.db.query('SELECT dispatched_at FROM work_items WHERE id = $1', ['wrk_hungup1'])).rows).toEqual([
      { dispatched_at: null },
    ]);
    const [work] = await node.poll({ waitMs: 1_000 });
    expect(work?.work_id).toBe('wrk_hungup1');
  });
});

describe('gateway work handed to a waiting poll in memory', () => {
  const fakeSignal = async () => {
    let deliver: (payload: string) => void = () => undefined;
    const bus = {
      publish: async () => undefined,
      subscribe: async (_: string, handler: (p: string) => void) => ((deliver = handler), async () => undefined),
    };
    const { signal, close } = await createJobSignal({
      bus,
      db: { query: async () => ({ rows: [], rowCount: 0 }) } as never,
    });
    return { signal, close, message: (payload: string) => deliver(payload) };
  };
  const node = (id: string) =>
    ({ id, country: 'CA', region: 'ca-east', attestation_verified: false, models: [], reputation: 1 }) as never;
  const row = { id: 'wrk_1' } as WorkRow;
  const settled = async (p: Promise<unknown>) =>
    Promise.race([p.then(() => true), new Promise((r) => setTimeout(() => r(false), 30))]);

  it('reserves only a waiting poll of that node, once; the poll gets the work, and ignores its timer meanwhile', async () => {
    const { signal, close, message } = await fakeSignal();
    expect(signal.reserve('nd_1')).toBeUndefined();
    const waiting = signal.wait(node('nd_1'), 10);
    expect(signal.reserve('nd_2')).toBeUndefined();
    const handoff = signal.reserve('nd_1');
    expect(handoff).toBeDefined();
    expect(signal.reserve('nd_1')).toBeUndefined();
    // Past its 10 ms and woken by its own message: still reserved.
    message('node:nd_1');
    expect(await settled(waiting)).toBe(false);
    expect(handoff?.deliver([row])).toBe(true);
    expect(await waiting).toEqual([row]);
    expect(handoff?.deliver([row])).toBe(false);
    // The message heard while reserved is kept: the next wait returns at once, to take that work.
    expect(await settled(signal.wait(node('nd_1'), 10_000))).toBe(true);
    await close();
  });

  it('a released poll carries on; a poll whose node hung up is handed nothing and cannot be reserved', async () => {
    const { signal, close } = await fakeSignal();
    const released = signal.wait(node('nd_1'), 10_000);
    signal.reserve('nd_1')?.release();
    expect(await released).toBeUndefined();
    const abort = new AbortController();
    const hungUp = signal.wait(node('nd_1'), 10_000, abort.signal);
    const handoff = signal.reserve('nd_1');
    abort.abort();
    expect(handoff?.deliver([row])).toBe(false);
    expect(await hungUp).toBeUndefined();
    const aborted = new AbortController();
    aborted.abort();
    void signal.wait(node('nd_2'), 50, aborted.signal);
    expect(signal.reserve('nd_2')).toBeUndefined();
    await close();
  });

  it('through svc: work routed to a node whose poll waits here is written dispatched and handed over, with no take statement', async () => {
    const f = await startGatewayFixture();
    const polls = watchPolls(f.server.ctx);
    try {
      await f.addNode();
      const ask = () =>
        f
          .openai()
          .chat.completions.create({ model: 'tinyllama', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 });
      await ask();
      const queries = vi.spyOn(f.server.ctx.db, 'query');
      const answers = [];
      for (let i = 0; i < 5; i++) {
        // The node's re-poll is waiting again before the next request.
        await polls.until(1);
        answers.push(await ask());
      }
      const sql = queries.mock.calls.map(([text]) => text);
      vi.restoreAllMocks();
      expect(sql.filter((text) => text.includes('SET dispatched_at = now()'))).toEqual([]);
      expect(sql.filter((text) => text.includes('dispatched_at = NULL'))).toEqual([]);
      // Work handed over in memory has its opening written behind the answer (gateway/service.ts).
      await f.server.ctx.writer.settled();
      const { rows } = await f.server.ctx.db.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM work_items WHERE job_id = ANY($1) AND dispatched_at IS NOT NULL',
        [answers.map((a) => a.id)],
      );
      expect(rows[0]?.n).toBe(5);
    } finally {
      await f.close();
    }
  });

  it("through svc: the answer is written to the waiting client before the node's receipt is acknowledged", async () => {
    const f = await startGatewayFixture();
    const finished: string[] = [];
    const watch = (req: IncomingMessage, res: ServerResponse) => res.on('finish', () => finished.push(req.url ?? ''));
    try {
      // The HTTP receipt route: its ordering is what this asserts (the channel acks by message).
      await f.addNode({ channel: false });
      const ask = () =>
        f
          .openai()
          .chat.completions.create({ model: 'tinyllama', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4 });
      await ask();
      f.server.app.server.on('request', watch);
      for (let i = 0; i < 5; i++) {
        await ask();
        await eventually(() => finished.filter((url) => url === '/api/v1/node/receipt').length === i + 1);
      }
      f.server.app.server.off('request', watch);
      const order = finished.filter((url) => url === '/v1/chat/completions' || url === '/api/v1/node/receipt');
      expect(order).toEqual(Array.from({ length: 5 }, () => ['/v1/chat/completions', '/api/v1/node/receipt']).flat());
    } finally {
      await f.close();
    }
  });
});

import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { bearer, createKey, createTestApp, createTestNode, signUp, type TestApp, type TestBuyer, type TestNode } from '../../../test/harness.js';
import { insertLeasedWork } from '../gateway/store.js';
import { CLAIM_RECHECK_MS, createJobSignal } from './background.js';

describe("a node's re-poll skips the job claim while nothing was signalled", () => {
  it('skips after an empty claim until a job message (not a node: wake-up) or the recheck interval', async () => {
    let deliver: (payload: string) => void = () => undefined;
    const bus = { publish: async () => undefined, subscribe: async (_: string, handler: (p: string) => void) => ((deliver = handler), async () => undefined) };
    const { signal, close } = await createJobSignal({ bus, db: { query: async () => ({ rows: [], rowCount: 0 }) } as never });
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
    const bus = { publish: async () => undefined, subscribe: async (_: string, handler: (p: string) => void) => ((deliver = handler), async () => undefined) };
    const { signal, close } = await createJobSignal({ bus, db: { query: async () => ({ rows: [], rowCount: 0 }) } as never });
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
    const transactions = vi.spyOn(t.ctx.db, 'transaction');
    expect(await node.poll({ waitMs: 50 })).toEqual([]);
    expect(transactions).not.toHaveBeenCalled();
    const waiting = node.poll({ waitMs: 10_000 });
    await new Promise((r) => setTimeout(r, 50));
    const submitted = await t.app.inject({ method: 'POST', url: '/api/v1/marketplace/jobs', headers: bearer(buyer.apiKey), payload: { kind: 1, budget: 1, max_price_per_unit: 0.00001, currency: 'CAD', inline_text: 'hi' } });
    const [work] = await waiting;
    expect(work?.job_id).toBe(submitted.json().job_id);
  });

  it('a waiting poll after a take that left nothing runs no take; gateway work leased to the node still reaches it at once', async () => {
    expect(await node.poll({ waitMs: 0 })).toEqual([]);
    const queries = vi.spyOn(t.ctx.db, 'query');
    expect(await node.poll({ waitMs: 50 })).toEqual([]);
    expect(queries.mock.calls.filter(([sql]) => sql.includes('dispatched_at'))).toEqual([]);
    vi.restoreAllMocks();
    const waiting = node.poll({ waitMs: 10_000 });
    await new Promise((r) => setTimeout(r, 50));
    // What the gateway does: the work is leased to the node, then its message is sent.
    const org = (await t.ctx.db.query<{ org_id: string }>('SELECT org_id FROM nodes WHERE id = $1', [node.nodeId])).rows[0]?.org_id ?? '';
    await insertLeasedWork(t.ctx.db, { id: 'wrk_leased1', request_id: 'chatcmpl-leased1', org_id: org, node_id: node.nodeId, type: 'chat', model: 'tinyllama', payload: {}, stream: false, lease_seconds: 30 });
    await t.ctx.bus.publish('jobs', `node:${node.nodeId}`);
    const [work] = await waiting;
    expect(work?.work_id).toBe('wrk_leased1');
  });
});

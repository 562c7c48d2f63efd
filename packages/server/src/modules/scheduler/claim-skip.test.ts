import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { bearer, createKey, createTestApp, createTestNode, signUp, type TestApp, type TestBuyer, type TestNode } from '../../../test/harness.js';
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
});

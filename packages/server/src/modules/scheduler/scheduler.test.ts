import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  bearer,
  createKey,
  createTestApp,
  createTestNode,
  signUp,
  type TestApp,
  type TestBuyer,
} from '../../../test/harness.js';
import { sweepExpiredLeases } from '../work/leases.js';

describe('the scheduler', () => {
  let t: TestApp;
  let buyer: TestBuyer;
  let operatorKey: string;
  const submit = async (extra: Record<string, unknown> = {}) =>
    (
      await t.app.inject({
        method: 'POST',
        url: '/api/v1/marketplace/jobs',
        headers: bearer(buyer.apiKey),
        payload: { kind: 1, budget: 0.05, max_price_per_unit: 0.00001, currency: 'CAD', inline_text: 'x', ...extra },
      })
    ).json().job_id as string;
  const expireLeases = async () => {
    await t.ctx.db.query(
      "UPDATE work_items SET lease_expires_at = now() - interval '1 second' WHERE status IN ('leased', 'delivered')",
    );
    await sweepExpiredLeases(t.ctx);
  };
  const job = async (id: string) =>
    (
      await t.app.inject({ method: 'GET', url: `/api/v1/marketplace/jobs/${id}`, headers: bearer(buyer.apiKey) })
    ).json();

  beforeAll(async () => {
    t = await createTestApp({
      env: { SVC_RATE_LIMIT_BURST: '100000', SVC_ORG_RATE_LIMIT_BURST: '100000' },
      periodicTasks: false,
    });
    buyer = await signUp(t.app);
    const operator = await signUp(t.app);
    operatorKey = await createKey(t.app, operator, ['operator']);
  });
  afterAll(() => t.close());

  it('re-queues a job whose lease is lost; it completes once on another node and is charged once', async () => {
    const a = await createTestNode(t.app, operatorKey, { country: 'JP', region: 'ap-ne' });
    const b = await createTestNode(t.app, operatorKey, { country: 'JP', region: 'ap-ne' });
    const id = await submit({ strict_jurisdiction: 'JP' });
    const [first] = await a.poll();
    if (!first) throw new Error('no work');
    await expireLeases();
    expect(await job(id)).toMatchObject({ status: 'pending', attempts: 1 });
    expect((await a.heartbeat([first.work_id])).cancel).toEqual([first.work_id]);
    const [second] = await b.poll();
    if (!second) throw new Error('no work for b');
    expect(second.job_id).toBe(id);
    expect((await a.complete(first, 'late', 1_000)).statusCode).toBe(409);
    expect((await b.complete(second, 'done', 1_000)).statusCode).toBe(200);
    expect(await job(id)).toMatchObject({ status: 'completed', attempts: 2, node_id: b.nodeId });
    const charges = await t.ctx.db.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM credit_transactions WHERE tx_type = 'charge' AND ref = $1",
      [id],
    );
    expect(charges.rows[0]?.n).toBe(1);
    const events = (
      await t.app.inject({ method: 'GET', url: `/api/v1/marketplace/jobs/${id}/audit`, headers: bearer(buyer.apiKey) })
    )
      .json()
      .events.map((e: { type: string }) => e.type);
    expect(events).toEqual([
      'job_submitted',
      'job_assigned',
      'job_lease_lost',
      'job_requeued',
      'job_assigned',
      'job_completed',
    ]);
  });

  it('does not tell a node to stop work it has just completed (its heartbeat can still list it)', async () => {
    const a = await createTestNode(t.app, operatorKey, { country: 'JP', region: 'ap-ne' });
    await submit({ strict_jurisdiction: 'JP' });
    const [work] = await a.poll();
    if (!work) throw new Error('no work');
    expect((await a.complete(work, 'done', 1_000)).statusCode).toBe(200);
    // The node lists the work until the answer to its receipt arrives; the heartbeat must not abort that.
    expect((await a.heartbeat([work.work_id])).cancel).toEqual([]);
  });

  it('fails a job after three lost leases and releases its hold', async () => {
    const node = await createTestNode(t.app, operatorKey, { country: 'BR', region: 'sa-east' });
    const id = await submit({ strict_jurisdiction: 'BR' });
    for (let i = 0; i < 3; i++) {
      const work = await node.poll();
      expect(work).toHaveLength(1);
      await expireLeases();
    }
    expect(await job(id)).toMatchObject({ status: 'failed', attempts: 3 });
    const hold = await t.ctx.db.query<{ status: string }>(
      'SELECT h.status FROM credit_holds h JOIN jobs j ON j.hold_id = h.id WHERE j.id = $1',
      [id],
    );
    expect(hold.rows[0]?.status).toBe('released');
  });

  it('retryable failures re-queue; a non-retryable one fails the job', async () => {
    const node = await createTestNode(t.app, operatorKey, { country: 'IN', region: 'ap-south' });
    const id = await submit({ strict_jurisdiction: 'IN' });
    const [w1] = await node.poll();
    if (!w1) throw new Error('no work');
    expect(
      (
        await node.call('POST', `/api/v1/node/work/${w1.work_id}/fail`, { message: 'out of memory', retryable: true })
      ).json().message,
    ).toContain('queued again');
    const [w2] = await node.poll();
    if (!w2) throw new Error('no work');
    await node.call('POST', `/api/v1/node/work/${w2.work_id}/fail`, {
      message: 'model refused the input',
      retryable: false,
    });
    expect(await job(id)).toMatchObject({ status: 'failed', failure_reason: 'model refused the input' });
  });

  it('never gives one job to two nodes, with many nodes polling at once', async () => {
    const nodes = await Promise.all(
      Array.from({ length: 6 }, () =>
        createTestNode(t.app, operatorKey, { country: 'NZ', region: 'ap-se', max_concurrency: 4 }),
      ),
    );
    const ids = new Set<string>();
    for (let i = 0; i < 24; i++) ids.add(await submit({ strict_jurisdiction: 'NZ' }));
    const batches = await Promise.all(nodes.map((n) => n.poll({ max: 4 })));
    const assigned = batches.flat().map((w) => w.job_id);
    expect(assigned).toHaveLength(24);
    expect(new Set(assigned).size).toBe(24);
    expect([...ids].every((id) => assigned.includes(id))).toBe(true);
  });

  it('honours strict_jurisdiction, TEE, green, price and capability constraints', async () => {
    const us = await createTestNode(t.app, operatorKey, {
      country: 'US',
      region: 'us-east',
      green: false,
      price_micro_per_unit: { '2': 0.3 },
    });
    const idCh = await submit({ strict_jurisdiction: 'CH' });
    expect(await us.poll()).toEqual([]);
    // No attested node is live: a sovereign job is refused at submission (docs/attestation.md), not queued.
    const tee = await t.app.inject({
      method: 'POST',
      url: '/api/v1/marketplace/jobs',
      headers: bearer(buyer.apiKey),
      payload: {
        kind: 1,
        budget: 0.05,
        max_price_per_unit: 0.00001,
        currency: 'CAD',
        inline_text: 'x',
        requires_tee: true,
      },
    });
    expect(tee.json()).toMatchObject({ code: 503, error: 'no_capacity' });
    const idGreen = await submit({ green_only: true, strict_jurisdiction: 'US' });
    const idCheap = await submit({ max_price_per_unit: 0.0000001, strict_jurisdiction: 'US' });
    const idTooCheapForThisNode = await submit({ max_price_per_unit: 0.0000001, strict_jurisdiction: 'US', kind: 2 });
    const idGpu = await submit({ required_capabilities: ['gpu'], strict_jurisdiction: 'US' });
    const got = await us.poll({ max: 4 });
    expect(got.map((w) => w.job_id)).not.toContain(idCh);
    expect(got.map((w) => w.job_id)).not.toContain(idGreen);
    expect(got.map((w) => w.job_id)).not.toContain(idGpu);
    expect(got.map((w) => w.job_id)).toContain(idCheap); // the node asks the catalogue floor, 0.05 micro-CAD
    expect(got.map((w) => w.job_id)).not.toContain(idTooCheapForThisNode); // it asks 0.3 micro-CAD per token for embeddings
  });
});

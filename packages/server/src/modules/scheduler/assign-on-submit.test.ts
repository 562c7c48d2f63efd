import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  bearer,
  createKey,
  createTestApp,
  createTestNode,
  signUp,
  watchPolls,
  type TestApp,
  type TestBuyer,
} from '../../../test/harness.js';
import { onTransactionStatements } from '../../../test/transaction-spy.js';
import { findNode } from '../nodes/store.js';
import { pollWork } from '../work/node-work.js';
import { sweepExpiredLeases } from '../work/leases.js';

/**
 * A job submitted while a node that may take it waits in this process is assigned in the
 * submission's own transaction and handed to that poll in memory (DESIGN.md section 8): no job
 * message, no wake-up, no claim.
 */
describe('assignment as a job is queued', () => {
  let t: TestApp;
  let buyer: TestBuyer;
  let operatorKey: string;
  beforeAll(async () => {
    t = await createTestApp();
    buyer = await signUp(t.app);
    operatorKey = await createKey(t.app, await signUp(t.app), ['operator']);
  });
  afterAll(() => t.close());
  afterEach(() => vi.restoreAllMocks());

  const submit = (payload: Record<string, unknown> = {}, key = buyer.apiKey) =>
    t.app.inject({
      method: 'POST',
      url: '/api/v1/marketplace/jobs',
      headers: bearer(key),
      payload: { kind: 1, budget: 0.05, max_price_per_unit: 0.00001, currency: 'CAD', inline_text: 'hi', ...payload },
    });
  const jobRow = async (jobId: string) =>
    (
      await t.ctx.db.query<{ status: string; node_id: string | null; work_id: string | null; latency_ms: number }>(
        `SELECT status, node_id, work_id, (extract(epoch FROM (assigned_at - pending_at)) * 1000)::float8 AS latency_ms
           FROM jobs WHERE id = $1`,
        [jobId],
      )
    ).rows[0];

  it('assigns it to the waiting node in its submission transaction and hands the work to that poll: no message, no claim', async () => {
    const node = await createTestNode(t.app, operatorKey, { country: 'NO' });
    const polls = watchPolls(t.ctx);
    const waiting = node.poll({ waitMs: 10_000 });
    await polls.until(1);
    const published = vi.spyOn(t.ctx.bus, 'publish');
    const claims: string[] = [];
    onTransactionStatements(t.ctx.db, (sql) => {
      if (sql.includes("FROM jobs WHERE status = 'pending'")) claims.push(sql);
    });
    const res = await submit({ strict_jurisdiction: 'NO' });
    expect(res.statusCode).toBe(201);
    const jobId = res.json().job_id as string;
    // Assigned before the submission answered, in the same transaction that queued it.
    const row = await jobRow(jobId);
    expect([row?.status, row?.node_id]).toEqual(['assigned', node.nodeId]);
    expect(row?.latency_ms).toBeLessThan(1000);
    const [work] = await waiting;
    expect([work?.job_id, work?.work_id]).toEqual([jobId, row?.work_id]);
    expect(published.mock.calls.filter(([, payload]) => payload === jobId)).toEqual([]);
    expect(claims).toEqual([]);
    // The run records the routing as the scheduler's decision, in order, once.
    const { rows: events } = await t.ctx.db.query<{ event_type: string; summary: string }>(
      `SELECT e.event_type, e.summary FROM evidence_events e JOIN evidence_runs r ON r.id = e.run_id
        WHERE r.job_id = $1 ORDER BY e.sequence`,
      [jobId],
    );
    expect(events.map((e) => e.event_type)).toEqual([
      'job.submitted',
      'policy.evaluated',
      'ledger.held',
      'routing.decided',
      'job.assigned',
    ]);
    expect(events[3]?.summary).toContain(`routed to ${node.nodeId}`);
    expect(events[3]?.summary).toContain('was waiting for work');
    // It runs to the end like any claimed job.
    expect((await node.complete(work as never, 'done', 1_000)).statusCode).toBe(200);
    expect((await jobRow(jobId))?.status).toBe('completed');
  });

  it('leaves a waiting node that may not take the job waiting, and queues the job for the claims', async () => {
    const node = await createTestNode(t.app, operatorKey, { country: 'IS' });
    const polls = watchPolls(t.ctx);
    const waiting = node.poll({ waitMs: 1_500 });
    await polls.until(1);
    const published = vi.spyOn(t.ctx.bus, 'publish');
    const res = await submit({ strict_jurisdiction: 'FI' });
    const jobId = res.json().job_id as string;
    expect((await jobRow(jobId))?.status).toBe('pending');
    expect(published.mock.calls.map(([, payload]) => payload)).toContain(jobId);
    expect(await waiting).toEqual([]);
    // The pending job is cancelled so the later tests' nodes never see it.
    const cancel = await t.app.inject({
      method: 'POST',
      url: `/api/v1/marketplace/jobs/${jobId}/cancel`,
      headers: bearer(buyer.apiKey),
    });
    expect(cancel.statusCode).toBe(200);
  });

  it('gives nothing to a waiting node that is full: the job stays pending for the claims', async () => {
    const node = await createTestNode(t.app, operatorKey, { country: 'EE', max_concurrency: 1 });
    const polls = watchPolls(t.ctx);
    const first = node.poll({ waitMs: 10_000 });
    await polls.until(1);
    const one = (await submit({ strict_jurisdiction: 'EE' })).json().job_id as string;
    expect((await first)[0]?.job_id).toBe(one);
    const again = node.poll({ waitMs: 1_500 });
    await polls.until(1);
    const two = (await submit({ strict_jurisdiction: 'EE' })).json().job_id as string;
    expect((await jobRow(two))?.status).toBe('pending');
    expect(await again).toEqual([]);
    const { rows } = await t.ctx.db.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM work_items WHERE node_id = $1 AND status IN ('leased', 'delivered')",
      [node.nodeId],
    );
    expect(rows[0]?.n).toBe(1);
  });

  it('gives the work to the next poll when the reserved poll hung up before the hand-over', async () => {
    const node = await createTestNode(t.app, operatorKey, { country: 'LV' });
    const row = await findNode(t.ctx.db, node.nodeId);
    if (!row) throw new Error('node not stored');
    const polls = watchPolls(t.ctx);
    const hangUp = new AbortController();
    const waiting = pollWork(t.ctx, row, { waitMs: 10_000, max: 1, signal: hangUp.signal });
    await polls.until(1);
    // The node hangs up just after the submission reserved its poll.
    const reserveFor = t.ctx.jobSignal.reserveFor.bind(t.ctx.jobSignal);
    vi.spyOn(t.ctx.jobSignal, 'reserveFor').mockImplementation((accepts) => {
      const reserved = reserveFor(accepts);
      hangUp.abort();
      return reserved;
    });
    const jobId = (await submit({ strict_jurisdiction: 'LV' })).json().job_id as string;
    expect((await waiting).work).toEqual([]);
    vi.restoreAllMocks();
    const next = await node.poll({ waitMs: 0 });
    expect(next.map((w) => w.job_id)).toEqual([jobId]);
    expect(next[0]?.work_id).toBe((await jobRow(jobId))?.work_id);
    const { rows } = await t.ctx.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM work_items WHERE job_id = $1',
      [jobId],
    );
    expect(rows[0]?.n).toBe(1);
  });

  it('gives the reserved poll back when the submission fails (402): the next job reaches it', async () => {
    const node = await createTestNode(t.app, operatorKey, { country: 'LT' });
    const polls = watchPolls(t.ctx);
    const waiting = node.poll({ waitMs: 10_000 });
    await polls.until(1);
    const refused = await submit({ strict_jurisdiction: 'LT', budget: 1_000_000 });
    expect(refused.statusCode).toBe(402);
    // Given back, the poll looks in the store and waits again (a poll left reserved would hang).
    await polls.until(1);
    const jobId = (await submit({ strict_jurisdiction: 'LT' })).json().job_id as string;
    expect((await waiting).map((w) => w.job_id)).toEqual([jobId]);
  });

  it('assigns a signalled job (a message from the bus) to a node waiting here in memory, without a claim', async () => {
    const node = await createTestNode(t.app, operatorKey, { country: 'PT' });
    const polls = watchPolls(t.ctx);
    const waiting = node.poll({ waitMs: 10_000 });
    await polls.until(1);
    // The submission finds no waiting poll (as on an instance the node is not connected to), so
    // its job message does the work.
    vi.spyOn(t.ctx.jobSignal, 'reserveFor').mockReturnValueOnce(undefined);
    const claims: string[] = [];
    onTransactionStatements(t.ctx.db, (sql) => {
      if (sql.includes("FROM jobs WHERE status = 'pending'")) claims.push(sql);
    });
    const jobId = (await submit({ strict_jurisdiction: 'PT' })).json().job_id as string;
    const [work] = await waiting;
    expect(work?.job_id).toBe(jobId);
    expect(claims).toEqual([]);
    const { rows } = await t.ctx.db.query<{ summary: string }>(
      `SELECT e.summary FROM evidence_events e JOIN evidence_runs r ON r.id = e.run_id
        WHERE r.job_id = $1 AND e.event_type = 'routing.decided'`,
      [jobId],
    );
    expect(rows.map((r) => r.summary)).toEqual([expect.stringContaining('as it was signalled')]);
  });

  it('offers a re-queued job to one eligible waiting node in memory; no waiting node is woken to claim', async () => {
    const a = await createTestNode(t.app, operatorKey, { country: 'GR' });
    const polls = watchPolls(t.ctx);
    const first = a.poll({ waitMs: 10_000 });
    await polls.until(1);
    const jobId = (await submit({ strict_jurisdiction: 'GR' })).json().job_id as string;
    expect((await first)[0]?.job_id).toBe(jobId);
    const b = await createTestNode(t.app, operatorKey, { country: 'GR' });
    const c = await createTestNode(t.app, operatorKey, { country: 'CY' });
    const other = c.poll({ waitMs: 3_000 });
    const second = b.poll({ waitMs: 10_000 });
    await polls.until(2);
    const claims: string[] = [];
    onTransactionStatements(t.ctx.db, (sql) => {
      if (sql.includes("FROM jobs WHERE status = 'pending'")) claims.push(sql);
    });
    await t.ctx.db.query(
      "UPDATE work_items SET lease_expires_at = now() - interval '1 second' WHERE job_id = $1 AND status IN ('leased', 'delivered')",
      [jobId],
    );
    await sweepExpiredLeases(t.ctx);
    expect((await second).map((w) => w.job_id)).toEqual([jobId]);
    // Neither poll claimed (a woken node claims at once). The other poll still looks once when its
    // wait ends, as every poll does after a message: it finds nothing.
    expect(claims).toEqual([]);
    expect(await other).toEqual([]);
  });
});

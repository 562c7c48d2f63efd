import { verifyBundle } from '@svc/protocol/verify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rotatePlatformKey } from '../../platform/secrets.js';
import {
  bearer,
  createKey,
  createTestApp,
  createTestNode,
  signUp,
  type TestApp,
  type TestBuyer,
} from '../../../test/harness.js';

interface GraphEvent {
  id: string;
  sequence: number;
  event_type: string;
  metadata: Record<string, unknown>;
  event_hash: string;
  created_at: string;
}
interface Graph {
  run: Record<string, unknown>;
  events: GraphEvent[];
  edges: { from_event_id: string; to_event_id: string; edge_type: string }[];
  certificate: {
    signed: boolean;
    verified: boolean;
    signature_hex: string | null;
    signer_public_key_hex: string | null;
    root_hash: string | null;
  };
}

describe('evidence runs of marketplace jobs', () => {
  let t: TestApp;
  let buyer: TestBuyer;
  let operatorKey: string;
  let platformKeys: { public_key_hex: string; valid_from: string; valid_until: string | null }[];
  beforeAll(async () => {
    t = await createTestApp();
    buyer = await signUp(t.app);
    operatorKey = await createKey(t.app, await signUp(t.app), ['operator']);
    platformKeys = (await t.app.inject({ method: 'GET', url: '/api/v1/keys/platform' })).json().keys;
  });
  afterAll(() => t.close());

  const get = (url: string, key = buyer.apiKey) => t.app.inject({ method: 'GET', url, headers: bearer(key) });
  const submit = async (extra: Record<string, unknown> = {}) => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/api/v1/marketplace/jobs',
      headers: bearer(buyer.apiKey),
      payload: {
        kind: 1,
        budget: 1,
        max_price_per_unit: 0.00001,
        currency: 'CAD',
        // Two prompts on a long-context model: 50,000 tokens stay within the job's metering bound.
        model: 'svc-llama-3.2-3b',
        inline_text: 'a prompt\nanother prompt',
        ...extra,
      },
    });
    expect(res.statusCode).toBe(201);
    return res.json().job_id as string;
  };

  it('records a completed job as it happens, signs it at the end, and serves a bundle that verifies offline', async () => {
    const node = await createTestNode(t.app, operatorKey, {
      price_micro_per_unit: { '1': 10 },
      models: ['svc-llama-3.2-3b'],
    });
    const jobId = await submit({ strict_jurisdiction: 'CA' });

    // Open: the first events are there before any node has seen the job, and nothing is signed.
    const open: Graph = (await get(`/api/v1/jobs/${jobId}/evidence`)).json();
    expect(open.events.map((e) => e.event_type)).toEqual(['job.submitted', 'policy.evaluated', 'ledger.held']);
    expect(open.run).toMatchObject({
      job_id: jobId,
      status: 'open',
      subject_type: 'job',
      trust_tier: 'public',
      jurisdiction: 'CA',
      work_type: 'llm_inference',
      root_hash: null,
    });
    expect(open.certificate).toMatchObject({ signed: false, verified: false });
    expect(open.events[1]?.metadata).toMatchObject({
      strict_jurisdiction: 'CA',
      execution_pool: 'public',
      model: 'svc-llama-3.2-3b',
    });

    const [work] = await node.poll({ waitMs: 1000 });
    if (!work) throw new Error('no work');
    await node.heartbeat([work.work_id]);
    const receipt = (
      await node.complete(work, JSON.stringify({ results: [{ index: 0, content: 'x' }] }), 50_000)
    ).json();

    const graph: Graph = (await get(`/api/v1/jobs/${jobId}/evidence`)).json();
    expect(graph.events.map((e) => e.event_type)).toEqual([
      'job.submitted',
      'policy.evaluated',
      'ledger.held',
      'routing.decided',
      'job.assigned',
      'job.started',
      'receipt.submitted',
      'receipt.verified',
      'ledger.charged',
      'job.completed',
    ]);
    expect(graph.events.map((e) => e.sequence)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    // Earlier events are unchanged by later appends: the open run's hashes are a prefix.
    expect(graph.events.slice(0, 3).map((e) => e.event_hash)).toEqual(open.events.map((e) => e.event_hash));
    const byType = Object.fromEntries(graph.events.map((e) => [e.event_type, e]));
    expect(byType['routing.decided']?.metadata).toMatchObject({ node_id: node.nodeId, country: 'CA' });
    expect(String(byType['routing.decided']?.metadata.reason)).toContain('meets every constraint');
    expect(byType['receipt.verified']?.metadata).toMatchObject({
      receipt_id: receipt.id,
      signature: receipt.signature,
      result_hash: receipt.result_hash,
      metering_units: 50_000,
    });
    expect(byType['ledger.charged']?.metadata).toMatchObject({
      charged_cents: 50,
      released_cents: 50,
      operator_earning: { amount_cents: 42, tx_type: 'earning' },
    });
    // Edges: a `then` chain plus causes (receipt.verified <- receipt.submitted, routing <- policy).
    expect(graph.edges.filter((e) => e.edge_type === 'then')).toHaveLength(9);
    expect(graph.edges).toContainEqual(
      expect.objectContaining({
        from_event_id: byType['policy.evaluated']?.id,
        to_event_id: byType['routing.decided']?.id,
        edge_type: 'caused_by',
      }),
    );
    expect(graph.edges).toContainEqual(
      expect.objectContaining({
        from_event_id: byType['receipt.submitted']?.id,
        to_event_id: byType['receipt.verified']?.id,
        edge_type: 'caused_by',
      }),
    );
    expect(graph.run).toMatchObject({ status: 'completed', event_count: 10 });
    expect(graph.certificate).toMatchObject({
      signed: true,
      verified: true,
      root_hash: graph.run.root_hash,
      signer_public_key_hex: platformKeys[0]?.public_key_hex,
    });

    const download = await get(`/api/v1/jobs/${jobId}/evidence/bundle`);
    expect(download.statusCode).toBe(200);
    expect(download.headers['content-disposition']).toBe(`attachment; filename="evidence-${jobId}.json"`);
    const bundle = download.json();
    expect(bundle).toMatchObject({
      type: 'svc.evidence_bundle.v1',
      job: { id: jobId, status: 'completed' },
      policy_snapshot: { strict_jurisdiction: 'CA' },
      receipts: [receipt],
    });
    const verified = await verifyBundle(download.body, { trustedKeys: platformKeys });
    expect(verified.checks.filter((c) => !c.ok)).toEqual([]);
    expect(verified.ok).toBe(true);
  });

  it('signs failed and cancelled jobs too, with the hold released', async () => {
    const jobId = await submit();
    const cancel = await t.app.inject({
      method: 'POST',
      url: `/api/v1/marketplace/jobs/${jobId}/cancel`,
      headers: bearer(buyer.apiKey),
    });
    expect(cancel.statusCode).toBe(200);
    const graph: Graph = (await get(`/api/v1/jobs/${jobId}/evidence`)).json();
    expect(graph.events.map((e) => e.event_type)).toEqual([
      'job.submitted',
      'policy.evaluated',
      'ledger.held',
      'job.cancelled',
      'ledger.released',
    ]);
    expect(graph.certificate).toMatchObject({ signed: true, verified: true });
    expect(
      (await verifyBundle((await get(`/api/v1/jobs/${jobId}/evidence/bundle`)).body, { trustedKeys: platformKeys })).ok,
    ).toBe(true);

    const node = await createTestNode(t.app, operatorKey, {
      price_micro_per_unit: { '1': 10 },
      models: ['svc-llama-3.2-3b'],
    });
    const failing = await submit();
    const [work] = await node.poll({ waitMs: 1000 });
    if (!work || work.job_id !== failing) throw new Error('expected the new job');
    expect(
      (
        await node.call('POST', `/api/v1/node/work/${work.work_id}/fail`, {
          message: 'out of memory',
          retryable: false,
        })
      ).statusCode,
    ).toBe(200);
    const failed: Graph = (await get(`/api/v1/jobs/${failing}/evidence`)).json();
    expect(failed.events.map((e) => e.event_type)).toEqual([
      'job.submitted',
      'policy.evaluated',
      'ledger.held',
      'routing.decided',
      'job.assigned',
      'job.attempt_failed',
      'job.failed',
      'ledger.released',
    ]);
    expect(failed.certificate.verified).toBe(true);
  });

  it('signs with the key active when the run closes, even when another process rotated it unannounced', async () => {
    const jobId = await submit();
    // Another process rotates the platform key and this server misses the bus message.
    const { retired, active } = await rotatePlatformKey(t.ctx.db);
    expect(t.ctx.secrets.active.key_id).toBe(retired?.key_id);
    const cancel = await t.app.inject({
      method: 'POST',
      url: `/api/v1/marketplace/jobs/${jobId}/cancel`,
      headers: bearer(buyer.apiKey),
    });
    expect(cancel.statusCode).toBe(200);
    const graph = (await get(`/api/v1/jobs/${jobId}/evidence`)).json() as Graph;
    expect(graph.certificate).toMatchObject({
      signed: true,
      verified: true,
      signer_public_key_hex: active.public_key_hex,
    });
    expect(graph.run).toMatchObject({ event_count: graph.events.length });
    expect(graph.events.map((e) => e.event_type)).toEqual([
      'job.submitted',
      'policy.evaluated',
      'ledger.held',
      'job.cancelled',
      'ledger.released',
    ]);
    expect(t.ctx.secrets.active.key_id).toBe(active.key_id);
    const keys = (await t.app.inject({ method: 'GET', url: '/api/v1/keys/platform' })).json().keys;
    const bundle = (await get(`/api/v1/jobs/${jobId}/evidence/bundle`)).body;
    const report = await verifyBundle(bundle, { trustedKeys: keys });
    expect(report.ok).toBe(true);
    platformKeys = keys; // the later tests verify what the new key signs
  });

  it('lists runs with filters and paging; another organization sees 404 and nothing listed', async () => {
    const all = (await get('/api/v1/evidence?limit=2')).json();
    expect(all).toMatchObject({ limit: 2, offset: 0 });
    expect(all.total).toBeGreaterThanOrEqual(3);
    expect(all.runs).toHaveLength(2);
    const openJob = await submit();
    const open = (await get('/api/v1/evidence?status=open')).json();
    expect(open.runs.map((r: { job_id: string }) => r.job_id)).toEqual([openJob]);
    expect((await get(`/api/v1/evidence?job_id=${openJob}`)).json().total).toBe(1);
    const future = new Date(Date.now() + 60_000).toISOString();
    expect((await get(`/api/v1/evidence?from=${encodeURIComponent(future)}`)).json().total).toBe(0);
    expect((await get(`/api/v1/evidence?to=${encodeURIComponent(future)}`)).json().total).toBe(all.total + 1);
    const bad = await get(
      `/api/v1/evidence?from=${encodeURIComponent(future)}&to=${encodeURIComponent(new Date().toISOString())}`,
    );
    expect(bad.statusCode).toBe(400);
    expect((await get('/api/v1/evidence?status=maybe')).statusCode).toBe(400);
    // A closed run reads `completed`; the filter takes `completed`, and `signed` (its old name) still.
    const completed = (await get('/api/v1/evidence?status=completed&limit=200')).json();
    expect(completed.total).toBe(all.total);
    expect(new Set(completed.runs.map((r: { status: string }) => r.status))).toEqual(new Set(['completed']));
    expect(completed.runs.map((r: { job_id: string }) => r.job_id)).not.toContain(openJob);
    expect((await get('/api/v1/evidence?status=signed&limit=200')).json()).toEqual(completed);

    const other = await signUp(t.app);
    expect((await get(`/api/v1/jobs/${openJob}/evidence`, other.apiKey)).statusCode).toBe(404);
    expect((await get(`/api/v1/jobs/${openJob}/evidence/bundle`, other.apiKey)).statusCode).toBe(404);
    expect((await get('/api/v1/evidence', other.apiKey)).json()).toMatchObject({ runs: [], total: 0 });
    expect((await get('/api/v1/jobs/job_nope/evidence')).statusCode).toBe(404);
  });

  it('keeps one gap-free sequence when many events are appended to one run at once', async () => {
    const jobId = await submit();
    const { recordEvents } = await import('./recorder.js');
    await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        t.ctx.db.transaction((tx) =>
          recordEvents(tx, jobId, [
            { type: 'test.note', summary: `note ${i}` },
            { type: 'test.note', summary: `note ${i} b`, causedBy: ['job.submitted'] },
          ]),
        ),
      ),
    );
    const graph: Graph = (await get(`/api/v1/jobs/${jobId}/evidence`)).json();
    expect(graph.events.map((e) => e.sequence)).toEqual(Array.from({ length: 43 }, (_, i) => i + 1));
    await t.app.inject({
      method: 'POST',
      url: `/api/v1/marketplace/jobs/${jobId}/cancel`,
      headers: bearer(buyer.apiKey),
    });
    const bundle = (await get(`/api/v1/jobs/${jobId}/evidence/bundle`)).body;
    expect((await verifyBundle(bundle, { trustedKeys: platformKeys })).ok).toBe(true);
  });
});

import { sha256Hex } from '@svc/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  bearer,
  createKey,
  createTestApp,
  createTestNode,
  signUp,
  svc1VerifiesIndependently,
  watchPolls,
  type TestApp,
  type TestBuyer,
} from '../../../test/harness.js';

describe('a marketplace job from estimate to signed receipt', () => {
  let t: TestApp;
  let buyer: TestBuyer;
  let operator: TestBuyer;
  let operatorKey: string;
  beforeAll(async () => {
    t = await createTestApp();
    buyer = await signUp(t.app);
    operator = await signUp(t.app);
    operatorKey = await createKey(t.app, operator, ['operator']);
  });
  afterAll(() => t.close());

  it('estimates in CAD and cents, and refuses unknown kinds and negative quantities', async () => {
    const ok = await t.app.inject({
      method: 'POST',
      url: '/api/v1/marketplace/estimate',
      headers: bearer(buyer.apiKey),
      payload: { kind: 5, estimated_duration_ms: 120_000 },
    });
    expect(ok.statusCode).toBe(200);
    expect(ok.json()).toMatchObject({ kind: 5, unit: 'core_second', units: 120, currency: 'CAD' });
    expect(ok.json().max_cost_cents).toBeGreaterThanOrEqual(ok.json().min_cost_cents);
    expect(
      (
        await t.app.inject({
          method: 'POST',
          url: '/api/v1/marketplace/estimate',
          headers: bearer(buyer.apiKey),
          payload: { kind: 11 },
        })
      ).statusCode,
    ).toBe(400);
    const negative = await t.app.inject({
      method: 'POST',
      url: '/api/v1/marketplace/estimate',
      headers: bearer(buyer.apiKey),
      payload: { kind: 1, estimated_tokens: -5 },
    });
    expect(negative.statusCode).toBe(400);
    expect(negative.json().details[0].path).toBe('/estimated_tokens');
    const pricing = await t.app.inject({
      method: 'GET',
      url: '/api/v1/marketplace/pricing',
      headers: bearer(buyer.apiKey),
    });
    expect(pricing.json().kinds).toHaveLength(10);
  });

  it('runs a job: submitted, held, assigned to an eligible node, completed with a verifiable receipt, charged and paid', async () => {
    const node = await createTestNode(t.app, operatorKey, {
      price_micro_per_unit: { '1': 10 },
      models: ['svc-llama-3.2-3b'],
    });
    const submit = await t.app.inject({
      method: 'POST',
      url: '/api/v1/marketplace/jobs',
      headers: bearer(buyer.apiKey),
      payload: {
        kind: 1,
        budget: 1.5,
        max_price_per_unit: 0.00001,
        currency: 'CAD',
        model: 'svc-llama-3.2-3b',
        inline_text: 'first prompt\nsecond prompt\n',
        strict_jurisdiction: 'CA',
      },
    });
    expect(submit.statusCode).toBe(201);
    const jobId = submit.json().job_id as string;
    const held = (
      await t.app.inject({ method: 'GET', url: '/api/v1/billing/balance', headers: bearer(buyer.apiKey) })
    ).json();
    expect(held).toMatchObject({ balance_cents: 500, held_cents: 150, available_cents: 350 });

    const [work] = await node.poll({ waitMs: 1000 });
    expect(work).toMatchObject({
      job_id: jobId,
      type: 'job',
      kind: 1,
      model: 'svc-llama-3.2-3b',
      payload: { inputs: ['first prompt', 'second prompt'] },
    });
    if (!work) throw new Error('no work');
    expect((await node.heartbeat([work.work_id])).cancel).toEqual([]);
    expect(
      (
        await t.app.inject({ method: 'GET', url: `/api/v1/marketplace/jobs/${jobId}`, headers: bearer(buyer.apiKey) })
      ).json().status,
    ).toBe('running');

    const output = JSON.stringify({
      results: [
        { index: 0, content: 'one' },
        { index: 1, content: 'two' },
      ],
    });
    // Within the job's metering bound (two prompts on svc-llama-3.2-3b: 66,105 tokens, docs/receipts.md).
    const done = await node.complete(work, output, 50_000);
    expect(done.statusCode).toBe(200);
    const receipt = done.json();
    expect(receipt).toMatchObject({
      job_id: jobId,
      node_id: node.nodeId,
      node_public_key: node.pubkey,
      result_hash: sha256Hex(output),
      metering_units: 50_000,
      signature_version: 'SVC1',
    });
    expect(svc1VerifiesIndependently(receipt)).toBe(true);

    const job = (
      await t.app.inject({ method: 'GET', url: `/api/v1/marketplace/jobs/${jobId}`, headers: bearer(buyer.apiKey) })
    ).json();
    // 50,000 tokens at 10 micro-CAD = 50 cents, under the 150-cent budget.
    expect(job).toMatchObject({
      status: 'completed',
      charged_cents: 50,
      result_hash: sha256Hex(output),
      node_id: node.nodeId,
      compute_units: 50_000,
      execution_pool: 'public',
      strict_jurisdiction: 'CA',
      job_type: 'llm_inference',
    });
    const balance = (
      await t.app.inject({ method: 'GET', url: '/api/v1/billing/balance', headers: bearer(buyer.apiKey) })
    ).json();
    expect(balance).toMatchObject({ balance_cents: 450, held_cents: 0 });
    const earnings = (
      await t.app.inject({ method: 'GET', url: '/api/v1/billing/transactions', headers: bearer(operator.apiKey) })
    ).json();
    expect(earnings.transactions[0]).toMatchObject({ tx_type: 'earning', amount_cents: 42 });

    const result = await t.app.inject({
      method: 'GET',
      url: `/api/v1/marketplace/jobs/${jobId}/result`,
      headers: bearer(buyer.apiKey),
    });
    expect(result.body).toBe(output);
    expect(result.headers['x-svc-result-hash']).toBe(sha256Hex(output));

    const receipts = (
      await t.app.inject({ method: 'GET', url: `/api/v1/jobs/${jobId}/receipts`, headers: bearer(buyer.apiKey) })
    ).json();
    expect(receipts.receipts).toEqual([receipt]);
    expect(
      (
        await t.app.inject({ method: 'GET', url: `/api/v1/job/receipts/${jobId}`, headers: bearer(buyer.apiKey) })
      ).json().receipts,
    ).toEqual([receipt]);
    const json = await t.app.inject({ method: 'GET', url: '/api/v1/audit/receipts', headers: bearer(buyer.apiKey) });
    expect(json.statusCode).toBe(200);
    expect(json.json().receipts).toContainEqual(receipt);
    const csv = await t.app.inject({
      method: 'GET',
      url: '/api/v1/audit/receipts?format=csv',
      headers: bearer(buyer.apiKey),
    });
    expect(csv.headers['content-type']).toContain('text/csv');
    expect(csv.body.split('\r\n')[0]).toBe(
      'id,job_id,node_id,node_public_key,result_hash,metering_units,signature,signature_version,created_at,metadata',
    );
    expect(csv.body).toContain(receipt.signature);

    const audit = (
      await t.app.inject({
        method: 'GET',
        url: `/api/v1/marketplace/jobs/${jobId}/audit`,
        headers: bearer(buyer.apiKey),
      })
    ).json();
    expect(audit.events.map((e: { type: string }) => e.type)).toEqual([
      'job_submitted',
      'job_assigned',
      'job_running',
      'job_completed',
    ]);
    expect(audit.events[0].details).toMatchObject({ budget_cents: 150, region: null });
    expect(audit.events[1].details).toMatchObject({ node_id: node.nodeId, region: 'ca-central' });
    expect(audit.events[3].details).toMatchObject({ result_hash: sha256Hex(output) });
    expect(
      audit.credit_ledger.map((r: { tx_type: string; amount_cents: number; hold_cents: number }) => [
        r.tx_type,
        r.amount_cents,
        r.hold_cents,
      ]),
    ).toEqual([
      ['hold', 0, 150],
      ['charge', -50, 0],
      ['release', 0, -150],
    ]);
    expect(audit.receipts_count).toBe(1);
  });

  it('wakes a waiting node within milliseconds of a job being submitted', async () => {
    const node = await createTestNode(t.app, operatorKey, {
      models: ['all-MiniLM-L6-v2'],
      country: 'FR',
      region: 'eu-west',
    });
    const polls = watchPolls(t.ctx);
    const polled = node.poll({ waitMs: 10_000 });
    // Submitted only once the poll waits, so the job can only reach it by waking it.
    await polls.until(1);
    const started = Date.now();
    await t.app.inject({
      method: 'POST',
      url: '/api/v1/marketplace/jobs',
      headers: bearer(buyer.apiKey),
      payload: {
        kind: 2,
        budget: 0.1,
        max_price_per_unit: 0.001,
        currency: 'CAD',
        inline_text: 'embed me',
        strict_jurisdiction: 'FR',
      },
    });
    const work = await polled;
    expect(work).toHaveLength(1);
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it('cancels a running job: hold released, node told to stop, no receipt accepted', async () => {
    const node = await createTestNode(t.app, operatorKey, { country: 'DE', region: 'eu-central' });
    const heldBefore = (
      await t.app.inject({ method: 'GET', url: '/api/v1/billing/balance', headers: bearer(buyer.apiKey) })
    ).json().held_cents as number;
    const jobId = (
      await t.app.inject({
        method: 'POST',
        url: '/api/v1/marketplace/jobs',
        headers: bearer(buyer.apiKey),
        payload: {
          kind: 1,
          budget: 1,
          max_price_per_unit: 0.00001,
          currency: 'CAD',
          inline_text: 'x',
          strict_jurisdiction: 'DE',
        },
      })
    ).json().job_id;
    const [work] = await node.poll({ waitMs: 1000 });
    if (!work) throw new Error('no work');
    const cancel = await t.app.inject({
      method: 'POST',
      url: `/api/v1/marketplace/jobs/${jobId}/cancel`,
      headers: bearer(buyer.apiKey),
    });
    expect(cancel.json().status).toBe('cancelled');
    expect((await node.heartbeat([work.work_id])).cancel).toEqual([work.work_id]);
    expect((await node.complete(work, 'late', 10)).statusCode).toBe(409);
    expect(
      (
        await t.app.inject({
          method: 'POST',
          url: `/api/v1/marketplace/jobs/${jobId}/cancel`,
          headers: bearer(buyer.apiKey),
        })
      ).statusCode,
    ).toBe(409);
    const balance = (
      await t.app.inject({ method: 'GET', url: '/api/v1/billing/balance', headers: bearer(buyer.apiKey) })
    ).json();
    expect(balance.held_cents).toBe(heldBefore);
    const audit = (
      await t.app.inject({
        method: 'GET',
        url: `/api/v1/marketplace/jobs/${jobId}/audit`,
        headers: bearer(buyer.apiKey),
      })
    ).json();
    expect(audit.events.map((e: { type: string }) => e.type)).toEqual([
      'job_submitted',
      'job_assigned',
      'job_cancelled',
    ]);
  });

  it('lists jobs with paging and a status filter; another organization sees none of them (404)', async () => {
    const list = (
      await t.app.inject({
        method: 'GET',
        url: '/api/v1/marketplace/jobs?limit=2&status=completed',
        headers: bearer(buyer.apiKey),
      })
    ).json();
    expect(list).toMatchObject({ total: 1, limit: 2, offset: 0 });
    const other = await signUp(t.app);
    const jobId = list.jobs[0].id;
    for (const url of [
      `/api/v1/marketplace/jobs/${jobId}`,
      `/api/v1/marketplace/jobs/${jobId}/audit`,
      `/api/v1/marketplace/jobs/${jobId}/result`,
      `/api/v1/jobs/${jobId}/receipts`,
    ]) {
      expect([url, (await t.app.inject({ method: 'GET', url, headers: bearer(other.apiKey) })).statusCode]).toEqual([
        url,
        404,
      ]);
    }
    expect(
      (
        await t.app.inject({
          method: 'POST',
          url: `/api/v1/marketplace/jobs/${jobId}/cancel`,
          headers: bearer(other.apiKey),
        })
      ).statusCode,
    ).toBe(404);
    expect(
      (await t.app.inject({ method: 'GET', url: '/api/v1/marketplace/jobs', headers: bearer(other.apiKey) })).json()
        .total,
    ).toBe(0);
  });

  it('reports the SLA from real timestamps, flagging small samples', async () => {
    const res = (
      await t.app.inject({
        method: 'GET',
        url: '/api/v1/marketplace/sla?window_hours=1',
        headers: bearer(buyer.apiKey),
      })
    ).json();
    expect(res.window_hours).toBe(1);
    expect(res.totals).toMatchObject({ completed: 1, cancelled: 1, finished: 2 });
    expect(res.assignment.samples).toBeGreaterThanOrEqual(2);
    expect(res.assignment.insufficient_sample).toBe(true);
    expect(res.assignment.p95_latency_ms).toBeGreaterThanOrEqual(0);
    expect(res.completion).toMatchObject({ success_rate: 1, insufficient_sample: true });
  });
});

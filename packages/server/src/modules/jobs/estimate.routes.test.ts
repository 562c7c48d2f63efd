import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { audioSamples } from '../../../test/audio-samples.js';
import {
  bearer,
  createKey,
  createTestApp,
  createTestNode,
  signUp,
  type TestApp,
  type TestBuyer,
} from '../../../test/harness.js';
import { jobEstimate } from './estimate.js';

/**
 * Estimates that add up (issue 41 point 6): a submission's `estimated_cost` is what
 * `POST /api/v1/marketplace/estimate` answers for the same fields, inputs counted, and the budget
 * it holds covers it.
 */
describe('the estimate of a job, on both routes', () => {
  let t: TestApp;
  let buyer: TestBuyer;
  let server: Server;
  let origin = '';
  const prompts = (n: number) => Array.from({ length: n }, (_, i) => `a red fox, take ${i}`).join('\n');

  beforeAll(async () => {
    const flac = audioSamples().find((s) => s.format === 'flac');
    server = createServer((req, res) => {
      if (req.url === '/tone.flac') res.end(flac?.bytes);
      else res.end(prompts(40));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    t = await createTestApp({ env: { SVC_FREE_TIER_CENTS: '100000' } });
    buyer = await signUp(t.app);
    // Kind 7 is refused at submission without a live node holding a verified attestation.
    const operator = await createKey(t.app, await signUp(t.app), ['operator']);
    const node = await createTestNode(t.app, operator, { gpu_model: 'H100', vram_bytes: 80 * 2 ** 30 });
    await t.ctx.db.query(
      "UPDATE nodes SET attestation_verified = true, attestation_expires_at = now() + interval '1 day', last_seen = now() WHERE id = $1",
      [node.nodeId],
    );
  });
  afterAll(async () => {
    await t.close();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  const post = (url: string, payload: Record<string, unknown>) =>
    t.app.inject({ method: 'POST', url, headers: bearer(buyer.apiKey), payload });

  // The fields both routes read, per kind; the submission adds what only it needs.
  const table: [string, Record<string, unknown>, Record<string, unknown>][] = [
    ['1: prompts and estimated_tokens', { kind: 1, inline_text: 'first\nsecond', estimated_tokens: 5_000 }, {}],
    ['1: long prompts over the default', { kind: 1, inline_text: 'x'.repeat(20_000) }, {}],
    ['2: inputs counted', { kind: 2, inline_text: 'y'.repeat(8_000) }, {}],
    ['2: a payload document', { kind: 2, payload_url: '/inputs.txt' }, {}],
    ['3: the audio measured', { kind: 3, payload_url: '/tone.flac' }, {}],
    ['4: 250 prompts', { kind: 4, inline_text: prompts(250) }, {}],
    ['4: 250 prompts and estimated_images', { kind: 4, inline_text: prompts(250), estimated_images: 250 }, {}],
    ['5', { kind: 5, estimated_duration_ms: 120_000 }, { runner_args: ['true'] }],
    ['6', { kind: 6, estimated_gpu_seconds: 30 }, { runner_args: ['true'] }],
    ['7', { kind: 7, estimated_gpu_seconds: 30 }, { runner_args: ['true'] }],
  ];

  it('answers the same estimated cost on submission as the estimate route, for every kind that can be submitted', async () => {
    const rows = [];
    for (const [name, fields, extra] of table) {
      const resolved = Object.fromEntries(
        Object.entries(fields).map(([k, v]) => [k, k === 'payload_url' ? `${origin}${String(v)}` : v]),
      );
      const estimate = await post('/api/v1/marketplace/estimate', resolved);
      const submit = await post('/api/v1/marketplace/jobs', {
        ...resolved,
        ...extra,
        budget: 50,
        max_price_per_unit: 1,
        currency: 'CAD',
      });
      rows.push({
        name,
        statuses: [estimate.statusCode, submit.statusCode],
        equal: submit.json().estimated_cost === estimate.json().max_cost,
      });
    }
    expect(rows).toEqual(table.map(([name]) => ({ name, statuses: [200, 201], equal: true })));
    // Kinds 8 and 10 are priced by the same function (their units counted by the server from the
    // capture set); kind 9 is submitted by work orders only (a 400 on this route).
    expect(jobEstimate(9, {}).max_cost).toBe(2);
  });

  it('estimates a 250-image job at 7.50 CAD (250 x 0.03) on both routes and holds at least that', async () => {
    const fields = { kind: 4, inline_text: prompts(250) };
    const estimate = await post('/api/v1/marketplace/estimate', fields);
    expect(estimate.json()).toMatchObject({ units: 250, max_cost: 7.5, max_cost_cents: 750 });
    const submit = await post('/api/v1/marketplace/jobs', {
      ...fields,
      budget: 7.5,
      max_price_per_unit: 0.03,
      currency: 'CAD',
    });
    expect(submit.statusCode).toBe(201);
    expect(submit.json().estimated_cost).toBe(7.5);
    const { rows } = await t.ctx.db.query<{ hold_cents: number }>(
      "SELECT hold_cents FROM credit_transactions WHERE ref = $1 AND tx_type = 'hold'",
      [submit.json().job_id],
    );
    expect(rows.map((r) => r.hold_cents)).toEqual([750]);
    // A budget below the estimate would have the job charged its budget for 7.50 of work: refused, nothing held.
    const short = await post('/api/v1/marketplace/jobs', {
      ...fields,
      budget: 0.03,
      max_price_per_unit: 0.03,
      currency: 'CAD',
    });
    expect(short.statusCode).toBe(400);
    expect(short.json()).toMatchObject({ details: [{ path: '/budget' }] });
    expect(short.json().message).toContain('7.5 CAD for 250 image(s)');
  });
});

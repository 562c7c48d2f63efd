import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createTestApp, signUp, type TestApp, type TestBuyer } from '../../../test/harness.js';
import { createEgress } from '../../platform/egress.js';
import { deliverArtifacts, sendDueWebhooks } from './delivery.js';
import { findJobById, listJobEvents } from './store.js';

/**
 * The SSRF guard end to end: a loopback-only page (listening on every address, so that an
 * IPv4-mapped address would reach it) must never be fetched, posted or put to by the platform,
 * whichever way the address is written, and even when DNS answers differently at connect time.
 */
describe('outbound requests never reach loopback (SSRF guard)', () => {
  let t: TestApp;
  let buyer: TestBuyer;
  let server: Server;
  let port = 0;
  const hits: string[] = [];
  // What "svc-hooks.example" resolves to now: public at submission, loopback later (rebinding).
  let answer = '93.184.216.34';

  beforeAll(async () => {
    server = createServer((req, res) => {
      hits.push(`${req.method ?? ''} ${req.url ?? ''}`);
      res.end('svc_internal_metric 1\n');
    });
    await new Promise<void>((resolve) => server.listen(0, '::', resolve));
    port = (server.address() as AddressInfo).port;
    t = await createTestApp({ env: { SVC_ALLOW_PRIVATE_EGRESS: '0' }, periodicTasks: false });
    await t.ctx.egress.close();
    t.ctx.egress = createEgress({
      allowPrivate: false,
      resolve: async () => [{ address: answer, family: answer.includes(':') ? 6 : 4 }],
    });
    buyer = await signUp(t.app);
  });
  afterAll(async () => {
    await t.close();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  const submit = (payload: Record<string, unknown>) =>
    t.app.inject({
      method: 'POST',
      url: '/api/v1/marketplace/jobs',
      headers: bearer(buyer.apiKey),
      payload: { budget: 0.5, max_price_per_unit: 0.00001, currency: 'CAD', ...payload },
    });

  it.each([
    '[::ffff:127.0.0.1]',
    '[::ffff:7f00:1]',
    '[::127.0.0.1]',
    '[64:ff9b::7f00:1]',
    '[2002:7f00:1::]',
    '[2001:0:4136:e378:8000:63bf:80ff:fffe]',
    '[fec0::1]',
    '127.0.0.1',
    '[::1]',
  ])('payload_url %s is a 400 naming why, and nothing is fetched', async (host) => {
    const res = await submit({ kind: 1, payload_url: `http://${host}:${port}/metrics` });
    expect(res.statusCode).toBe(400);
    expect(res.json().message).toMatch(
      /^payload_url must point to a public address: refused to connect to .*(loopback|site-local)/,
    );
    expect(hits).toEqual([]);
  });

  it('a payload_url whose name turns to loopback at connect time (DNS rebinding) is refused at connect', async () => {
    answer = '93.184.216.34';
    const resolveOnce = t.ctx.egress;
    let calls = 0;
    t.ctx.egress = createEgress({
      allowPrivate: false,
      resolve: async () =>
        calls++ === 0 ? [{ address: '93.184.216.34', family: 4 }] : [{ address: '::ffff:127.0.0.1', family: 6 }],
    });
    try {
      const res = await submit({ kind: 1, payload_url: `http://svc-inputs.example:${port}/metrics` });
      expect(res.statusCode).toBe(400);
      expect(res.json().message).toBe(
        'payload_url could not be fetched: refused to connect to svc-inputs.example (::ffff:127.0.0.1): loopback (127.0.0.1 inside an IPv4-mapped IPv6 address) addresses are not reachable from the platform',
      );
      expect(calls).toBe(2);
      expect(hits).toEqual([]);
    } finally {
      await t.ctx.egress.close();
      t.ctx.egress = resolveOnce;
    }
  });

  it('a webhook and PUT delivery whose host became loopback are refused at connect, and the reason is recorded', async () => {
    answer = '93.184.216.34';
    const res = await submit({
      kind: 5,
      runner_args: ['true'],
      delivery_webhook_url: `http://svc-hooks.example:${port}/hook`,
      delivery_mode: 'put',
      delivery_artifact_put_url: `http://svc-hooks.example:${port}/artifact`,
    });
    expect(res.statusCode).toBe(201);
    const jobId = res.json().job_id as string;
    const cancel = await t.app.inject({
      method: 'POST',
      url: `/api/v1/marketplace/jobs/${jobId}/cancel`,
      headers: bearer(buyer.apiKey),
    });
    expect(cancel.statusCode).toBe(200);
    answer = '::ffff:127.0.0.1';
    expect(await sendDueWebhooks(t.ctx)).toBe(1);
    const reason =
      'refused to connect to svc-hooks.example (::ffff:127.0.0.1): loopback (127.0.0.1 inside an IPv4-mapped IPv6 address) addresses are not reachable from the platform';
    const { rows } = await t.ctx.db.query<{ last_error: string; attempts: number; status: string }>(
      'SELECT last_error, attempts, status FROM webhook_deliveries WHERE job_id = $1',
      [jobId],
    );
    expect(rows).toEqual([{ last_error: reason, attempts: 1, status: 'pending' }]);
    expect(
      (await listJobEvents(t.ctx.db, jobId)).find((e) => e.type === 'webhook_attempt_failed')?.details,
    ).toMatchObject({ error: reason });

    const job = await findJobById(t.ctx.db, jobId);
    if (!job) throw new Error('job vanished');
    await deliverArtifacts(t.ctx, job, { bytes: Buffer.from('result'), contentType: 'text/plain' }, 'rcp_test');
    const put = (await listJobEvents(t.ctx.db, jobId)).find((e) => e.type === 'delivery_artifact_put');
    expect(put?.details).toEqual({ ok: false, error: reason });
    expect(hits).toEqual([]);
  });
});

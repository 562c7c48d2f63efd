import { createServer, type IncomingMessage } from 'node:http';
import { createPublicKey, verify } from 'node:crypto';
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
import { sendDueWebhooks, webhookBackoffSeconds } from './delivery.js';
import { isPrivateAddress } from '@svc/protocol/egress';
import { checkOutboundUrl } from '../../platform/egress.js';

interface Received {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
}

/** A receiver on loopback that records requests and fails the first `failFirst` webhook posts. */
async function startReceiver(failFirst: number) {
  const received: Received[] = [];
  let failures = failFirst;
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      received.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, body });
      if (req.url === '/hook' && failures > 0) {
        failures--;
        res.writeHead(500).end('try later');
        return;
      }
      res.writeHead(200).end('ok');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return { url: `http://127.0.0.1:${port}`, received, close: () => new Promise<void>((r) => server.close(() => r())) };
}

describe('delivery: inline result, artifact PUT, signed webhooks with retries', () => {
  let t: TestApp;
  let buyer: TestBuyer;
  let node: TestNode;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  beforeAll(async () => {
    t = await createTestApp({ env: { SVC_ALLOW_PRIVATE_EGRESS: '1' }, periodicTasks: false });
    buyer = await signUp(t.app);
    node = await createTestNode(t.app, await createKey(t.app, await signUp(t.app), ['operator']));
    receiver = await startReceiver(1);
  });
  afterAll(async () => {
    await receiver.close();
    await t.close();
  });

  it('PUTs the artifact and manifest, and posts a Standard Webhooks-signed event, retried after a failure', async () => {
    const submit = await t.app.inject({
      method: 'POST',
      url: '/api/v1/marketplace/jobs',
      headers: bearer(buyer.apiKey),
      payload: {
        kind: 1,
        budget: 0.5,
        max_price_per_unit: 0.00001,
        currency: 'CAD',
        inline_text: 'hello',
        delivery_mode: 'put',
        output_file: 'out.json',
        delivery_artifact_put_url: `${receiver.url}/artifact?sig=abc`,
        delivery_manifest_put_url: `${receiver.url}/manifest`,
        delivery_webhook_url: `${receiver.url}/hook`,
      },
    });
    expect(submit.statusCode).toBe(201);
    const jobId = submit.json().job_id as string;
    const [work] = await node.poll();
    if (!work) throw new Error('no work');
    expect((await node.complete(work, '{"ok":true}', 100)).statusCode).toBe(200);
    await eventually(() => receiver.received.filter((r) => r.method === 'PUT').length >= 2);
    const artifact = receiver.received.find((r) => r.url.startsWith('/artifact'));
    expect(artifact?.body).toBe('{"ok":true}');
    const manifest = JSON.parse(receiver.received.find((r) => r.url === '/manifest')?.body ?? '{}');
    expect(manifest).toMatchObject({ job_id: jobId, file: 'out.json', bytes: 11 });

    // First attempt fails (500), is recorded, and is retried once due.
    await sendDueWebhooks(t.ctx);
    await t.ctx.db.query("UPDATE webhook_deliveries SET next_attempt_at = now() WHERE status = 'pending'");
    await sendDueWebhooks(t.ctx);
    const hooks = receiver.received.filter((r) => r.url === '/hook');
    expect(hooks).toHaveLength(2);
    const last = hooks[1];
    if (!last) throw new Error('no webhook');
    expect(JSON.parse(last.body)).toMatchObject({
      type: 'job.completed',
      data: { job_id: jobId, status: 'completed' },
    });
    const [version, sig] = String(last.headers['webhook-signature']).split(',');
    expect(version).toBe('v1a');
    const key = createPublicKey({
      key: Buffer.concat([
        Buffer.from('302a300506032b6570032100', 'hex'),
        Buffer.from(t.ctx.secrets.active.public_key_hex, 'hex'),
      ]),
      format: 'der',
      type: 'spki',
    });
    const signed = `${String(last.headers['webhook-id'])}.${String(last.headers['webhook-timestamp'])}.${last.body}`;
    expect(verify(null, Buffer.from(signed), key, Buffer.from(sig ?? '', 'base64'))).toBe(true);
    const audit = (
      await t.app.inject({
        method: 'GET',
        url: `/api/v1/marketplace/jobs/${jobId}/audit`,
        headers: bearer(buyer.apiKey),
      })
    ).json();
    const types = audit.events.map((e: { type: string }) => e.type);
    expect(types).toEqual(
      expect.arrayContaining([
        'delivery_artifact_put',
        'delivery_manifest_put',
        'webhook_attempt_failed',
        'webhook_delivered',
      ]),
    );
    expect(audit.job_id).toBe(jobId);
  });

  it('backs off exponentially, capped at an hour', () => {
    expect([1, 2, 3, 4, 10, 20].map(webhookBackoffSeconds)).toEqual([10, 20, 40, 80, 3600, 3600]);
  });

  it('refuses outbound URLs to private, loopback and link-local addresses unless allowed', async () => {
    for (const ip of [
      '127.0.0.1',
      '10.1.2.3',
      '172.16.0.1',
      '192.168.1.1',
      '169.254.169.254',
      '::1',
      'fd00::1',
      '::ffff:127.0.0.1',
      '100.64.0.1',
      '0.0.0.0',
    ])
      expect([ip, isPrivateAddress(ip)]).toEqual([ip, true]);
    for (const ip of ['8.8.8.8', '1.1.1.1', '2606:4700::1111']) expect([ip, isPrivateAddress(ip)]).toEqual([ip, false]);
    await expect(
      checkOutboundUrl('http://169.254.169.254/latest/meta-data', {
        allowPrivate: false,
        path: '/delivery_webhook_url',
      }),
    ).rejects.toThrow(/public address: .*link-local/);
    await expect(
      checkOutboundUrl('http://localhost:9/x', { allowPrivate: false, path: '/payload_url' }),
    ).rejects.toThrow(/public address: .*loopback/);
    await expect(
      checkOutboundUrl('ftp://example.com/x', { allowPrivate: false, path: '/payload_url' }),
    ).rejects.toThrow(/http or https/);
    await expect(
      checkOutboundUrl('http://user:pw@example.com/x', { allowPrivate: true, path: '/payload_url' }),
    ).rejects.toThrow(/credentials/);
    const strict = await createTestApp({ env: { SVC_ALLOW_PRIVATE_EGRESS: '0' } });
    try {
      const b = await signUp(strict.app);
      const res = await strict.app.inject({
        method: 'POST',
        url: '/api/v1/marketplace/jobs',
        headers: bearer(b.apiKey),
        payload: {
          kind: 5,
          budget: 0.1,
          max_price_per_unit: 0.001,
          currency: 'CAD',
          runner_args: ['true'],
          delivery_webhook_url: 'http://127.0.0.1:1/hook',
        },
      });
      expect(res.statusCode).toBe(400);
      expect(res.json().details).toEqual([
        {
          path: '/delivery_webhook_url',
          message:
            'must point to a public address: refused to connect to 127.0.0.1: loopback addresses are not reachable from the platform',
        },
      ]);
      const balance = (
        await strict.app.inject({ method: 'GET', url: '/api/v1/billing/balance', headers: bearer(b.apiKey) })
      ).json();
      expect(balance.held_cents).toBe(0);
    } finally {
      await strict.close();
    }
  });

  it('validates every job field with a clear 400, and 402 when the budget cannot be held', async () => {
    const post = (payload: Record<string, unknown>) =>
      t.app.inject({
        method: 'POST',
        url: '/api/v1/marketplace/jobs',
        headers: bearer(buyer.apiKey),
        payload: { kind: 1, budget: 0.1, max_price_per_unit: 0.00001, currency: 'CAD', inline_text: 'x', ...payload },
      });
    const cases: [Record<string, unknown>, string][] = [
      [{ currency: 'USD' }, '/currency'],
      [{ kind: 42 }, '/kind'],
      [{ budget: -1 }, '/budget'],
      [{ budget: 0.001 }, '/budget'],
      [{ strict_jurisdiction: 'canada' }, '/strict_jurisdiction'],
      [{ model: 'gpt-5' }, '/model'],
      [{ inline_text: undefined }, '/inline_text'],
      [{ required_capabilities: ['quantum'] }, '/required_capabilities/0'],
      [{ payload_url: 'not a url', inline_text: undefined }, '/payload_url'],
      [{ max_price_per_unit: 0.000000001 }, '/max_price_per_unit'],
      [{ kind: 5, runner_args: undefined, inline_text: undefined }, '/runner_args'],
      [{ delivery_mode: 'put' }, '/delivery_artifact_put_url'],
      [{ surprise: true }, '/surprise'],
    ];
    for (const [payload, path] of cases) {
      const res = await post(payload);
      expect([JSON.stringify(payload), res.statusCode, res.json().details?.[0]?.path]).toEqual([
        JSON.stringify(payload),
        400,
        path,
      ]);
    }
    const poor = await post({ budget: 100 });
    expect(poor.statusCode).toBe(402);
    expect(poor.json().error).toBe('insufficient_credits');
  });
});

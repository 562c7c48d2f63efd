import {
  generateEd25519,
  NODE_HEADERS,
  publicKeyHex,
  registerMessage,
  requestMessage,
  sha256Hex,
  signHex,
  signSvc1,
} from '@svc/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestStore, type TestStore } from '@svc/server/testing';
import { spawnSvc, until, waitForUrl, type SpawnedSvc } from './spawn.js';

/**
 * A paid answer survives a crash: `svc serve` is killed with SIGKILL right after it accepted the
 * node's receipt for an image generation (the buyer charged, the answer maybe never sent), then
 * restarted on the same data dir; the buyer finds the request and downloads the image through
 * GET /api/v1/gateway/requests/{id}.
 */
describe('an image charged just before a kill -9 is still fetchable after the restart', () => {
  let store: TestStore;
  let server: SpawnedSvc | undefined;
  let base = '';
  const env = () => ({
    SVC_DATA_DIR: store.dataDir,
    SVC_PORT: '0',
    SVC_LOG_LEVEL: 'warn',
    ...(store.databaseUrl ? { DATABASE_URL: store.databaseUrl } : {}),
  });

  beforeAll(async () => {
    store = await createTestStore();
    server = spawnSvc(['serve'], env());
    base = await waitForUrl(server);
  }, 120_000);

  afterAll(async () => {
    server?.child.kill('SIGKILL');
    if (server) await server.exited;
    await store.drop();
  });

  const json = async (
    path: string,
    init: { method?: string; body?: unknown; credential?: string; headers?: Record<string, string>; raw?: string } = {},
  ) => {
    const res = await fetch(`${base}${path}`, {
      method: init.method ?? (init.body === undefined && init.raw === undefined ? 'GET' : 'POST'),
      headers: {
        ...(init.credential ? { authorization: `Bearer ${init.credential}` } : {}),
        ...(init.body !== undefined || init.raw !== undefined ? { 'content-type': 'application/json' } : {}),
        ...init.headers,
      },
      body: init.raw ?? (init.body === undefined ? undefined : JSON.stringify(init.body)),
    });
    return { status: res.status, body: (await res.json()) as Record<string, any> }; // eslint-disable-line @typescript-eslint/no-explicit-any
  };

  it('kill -9 after the charge, restart, GET /api/v1/gateway/requests/{id} gives the image', async () => {
    const operator = (
      await json('/api/v1/auth/signup', { body: { email: 'op@recovery.test', password: 'recovery e2e password' } })
    ).body;
    const operatorKey = (
      await json('/api/v1/auth/api-keys', {
        body: { label: 'node', scopes: ['operator'] },
        credential: operator.token as string,
      })
    ).body.api_key as string;
    const buyerKey = (
      await json('/api/v1/auth/signup', { body: { email: 'buyer@recovery.test', password: 'recovery e2e password' } })
    ).body.api_key as string;

    // A node speaking the real protocol over HTTP, so the test knows the moment the receipt is accepted.
    const { privateKey } = generateEd25519();
    const pubkey = publicKeyHex(privateKey);
    const info = {
      pubkey,
      country: 'CA',
      region: 'ca-central',
      models: ['sdxl-turbo'],
      capabilities: ['gpu'],
      cpu_cores: 8,
      ram_bytes: 2 ** 34,
      max_concurrency: 1,
    };
    const reg = await json('/api/v1/node/register', {
      body: { ...info, signature: signHex(registerMessage(pubkey, info), privateKey) },
      credential: operatorKey,
    });
    expect(reg.status).toBe(200);
    const nodeId = reg.body.node_id as string;
    const signed = (method: 'GET' | 'POST', path: string, body?: unknown) => {
      const raw = body === undefined ? '' : JSON.stringify(body);
      const timestamp = Date.now();
      const signature = signHex(requestMessage({ method, pathWithQuery: path, timestamp, body: raw }), privateKey);
      return json(path, {
        method,
        ...(body === undefined ? {} : { raw }),
        headers: {
          [NODE_HEADERS.node]: nodeId,
          [NODE_HEADERS.timestamp]: String(timestamp),
          [NODE_HEADERS.signature]: signature,
        },
      });
    };

    const asked = fetch(`${base}/v1/images/generations`, {
      method: 'POST',
      headers: { authorization: `Bearer ${buyerKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'sdxl-turbo', prompt: 'a fox in the snow', size: '64x64' }),
    }).then(
      (r) => r.status,
      () => 'connection lost',
    );
    const work = await until('the image work', async () => {
      const polled = await signed('GET', '/api/v1/node/work?wait_ms=1000&max=1');
      return (polled.body.work as { work_id: string; job_id: string }[] | undefined)?.[0];
    });
    const png = Buffer.from('89504e470d0a1a0a0000000d49484452000000400000004008060000', 'hex');
    const output = JSON.stringify({ images: [{ content_type: 'image/png', b64_json: png.toString('base64') }] });
    const resultHash = sha256Hex(output);
    const receipt = await signed('POST', '/api/v1/node/receipt', {
      job_id: work.job_id,
      pubkey,
      result_hash: resultHash,
      metering_units: 1,
      signature: signSvc1(
        { job_id: work.job_id, node_public_key_hex: pubkey, result_hash_hex: resultHash, metering_units: 1 },
        privateKey,
      ),
      metadata: { model: 'sdxl-turbo', engine: 'test' },
      result: {
        output,
        encoding: 'utf8',
        content_type: 'application/json',
        result_hash: resultHash,
        metering_units: 1,
      },
    });
    expect(receipt.status).toBe(200);
    // The receipt is committed and the buyer charged: crash now.
    server?.child.kill('SIGKILL');
    expect(await server?.exited).toBe('SIGKILL');
    await asked;

    server = spawnSvc(['serve'], env());
    base = await waitForUrl(server);
    // The buyer finds the request in its list (the answer may never have reached it) and fetches it.
    const listed = await json('/api/v1/gateway/requests', { credential: buyerKey });
    expect((listed.body.requests as { id: string }[]).map((r) => r.id)).toEqual([work.job_id]);
    const got = await json(`/api/v1/gateway/requests/${work.job_id}`, { credential: buyerKey });
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({
      id: work.job_id,
      type: 'image',
      status: 'completed',
      charged_cents: 3,
      node_id: nodeId,
    });
    expect(got.body.receipt_id).toMatch(/^rcpt_/);
    const url = got.body.result.data[0].url as string;
    expect(url).toMatch(/\/v1\/files\/img-[^?]+\.png\?expires=\d+&signature=[0-9a-f]{64}$/);
    const file = await fetch(`${base}${new URL(url).pathname}${new URL(url).search}`);
    expect(file.status).toBe(200);
    expect(Buffer.from(await file.arrayBuffer()).equals(png)).toBe(true);
    const balance = await json('/api/v1/billing/transactions', { credential: buyerKey });
    // One charge for the request (its hold and release rows reference it too: docs/billing.md).
    const rows = (balance.body.transactions as { ref: string | null; tx_type: string }[]).filter(
      (t) => t.ref === work.job_id,
    );
    expect(rows.filter((t) => t.tx_type === 'charge')).toHaveLength(1);
  }, 180_000);
});

import { generateEd25519, publicKeyHex, registerMessage, signHex } from '@svc/protocol';
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

describe('nodes: registration, liveness, listing, attestation', () => {
  let t: TestApp;
  let operator: TestBuyer;
  let operatorKey: string;
  beforeAll(async () => {
    // A verifier that accepts method 1 with evidence 'good' (a real one checks TDX quotes).
    t = await createTestApp();
    t.ctx.attestation = {
      ...t.ctx.attestation,
      name: 'test',
      verify: async ({ method, evidence }) => method === 1 && evidence === 'good',
    };
    operator = await signUp(t.app);
    operatorKey = await createKey(t.app, operator, ['operator']);
  });
  afterAll(() => t.close());

  it('registers with proof of key possession; the same key again updates the same node', async () => {
    const { privateKey } = generateEd25519();
    const pubkey = publicKeyHex(privateKey);
    const body = {
      pubkey,
      country: 'CA',
      region: 'ca-east',
      models: ['tinyllama'],
      gpu_model: 'NVIDIA L4',
      vram_bytes: 24 * 2 ** 30,
    };
    const first = await t.app.inject({
      method: 'POST',
      url: '/api/v1/node/register',
      headers: bearer(operatorKey),
      payload: { ...body, signature: signHex(registerMessage(pubkey, body), privateKey) },
    });
    expect(first.statusCode).toBe(200);
    expect(first.json()).toMatchObject({
      status: 'online',
      poll_interval_ms: 25_000,
      server_public_key: t.ctx.secrets.active.public_key_hex,
    });
    const changed = { ...body, region: 'ca-west' };
    const second = await t.app.inject({
      method: 'POST',
      url: '/api/v1/node/register',
      headers: bearer(operatorKey),
      payload: { ...changed, signature: signHex(registerMessage(pubkey, changed), privateKey) },
    });
    expect(second.json().node_id).toBe(first.json().node_id);
    const wrongKey = generateEd25519().privateKey;
    const forged = await t.app.inject({
      method: 'POST',
      url: '/api/v1/node/register',
      headers: bearer(operatorKey),
      payload: { ...body, signature: signHex(registerMessage(pubkey, body), wrongKey) },
    });
    expect(forged.statusCode).toBe(401);
    const other = await signUp(t.app);
    const stolen = await t.app.inject({
      method: 'POST',
      url: '/api/v1/node/register',
      headers: bearer(await createKey(t.app, other, ['operator'])),
      payload: { ...body, signature: signHex(registerMessage(pubkey, body), privateKey) },
    });
    expect(stolen.statusCode).toBe(409);
    const buyerKey = await createKey(t.app, operator, ['buyer']);
    expect(
      (
        await t.app.inject({
          method: 'POST',
          url: '/api/v1/node/register',
          headers: bearer(buyerKey),
          payload: { ...body, signature: 'x' },
        })
      ).statusCode,
    ).toBe(403);
    const badModel = { ...body, models: ['gpt-9'] };
    const res = await t.app.inject({
      method: 'POST',
      url: '/api/v1/node/register',
      headers: bearer(operatorKey),
      payload: { ...badModel, signature: signHex(registerMessage(pubkey, badModel), privateKey) },
    });
    expect(res.json().details).toEqual([{ path: '/models/0', message: 'not in the catalogue' }]);
  });

  it("lists the organization's nodes with NodeSummary fields, filters and paging; others see none", async () => {
    await createTestNode(t.app, operatorKey, { country: 'FR', region: 'eu-west', models: ['all-MiniLM-L6-v2'] });
    const list = (
      await t.app.inject({ method: 'GET', url: '/api/v1/nodes?country=FR', headers: bearer(operator.apiKey) })
    ).json();
    expect(list.total).toBe(1);
    expect(list.nodes[0]).toMatchObject({
      status: 'online',
      availability: 'available',
      country: 'FR',
      region: 'eu-west',
      models: ['all-MiniLM-L6-v2'],
      device_class: 'cpu',
      attestation: 'none',
    });
    expect(list.nodes[0].last_seen).toBeGreaterThan(Date.now() / 1000 - 60);
    const paged = (
      await t.app.inject({ method: 'GET', url: '/api/v1/nodes?limit=1&offset=1', headers: bearer(operator.apiKey) })
    ).json();
    expect(paged.nodes).toHaveLength(1);
    expect(paged.total).toBe(2);
    const stranger = await signUp(t.app);
    expect(
      (await t.app.inject({ method: 'GET', url: '/api/v1/nodes', headers: bearer(stranger.apiKey) })).json(),
    ).toEqual({ nodes: [], total: 0 });
    await t.ctx.db.query("UPDATE nodes SET last_seen = now() - interval '5 minutes'");
    const offline = (
      await t.app.inject({ method: 'GET', url: '/api/v1/nodes?status=offline', headers: bearer(operator.apiKey) })
    ).json();
    expect(offline.total).toBe(2);
  });

  it('only attested nodes join the sovereign pool; unverified claims are recorded as such', async () => {
    const verified = await createTestNode(t.app, operatorKey, {
      country: 'CH',
      attestation_method: 1,
      attestation_evidence: 'good',
    });
    const unverified = await createTestNode(t.app, operatorKey, {
      country: 'CH',
      attestation_method: 1,
      attestation_evidence: 'forged',
    });
    const buyer = await signUp(t.app);
    const res = await t.app.inject({
      method: 'POST',
      url: '/api/v1/marketplace/jobs',
      headers: bearer(buyer.apiKey),
      payload: {
        kind: 1,
        budget: 0.1,
        max_price_per_unit: 0.00001,
        currency: 'CAD',
        inline_text: 'secret',
        requires_tee: true,
        strict_jurisdiction: 'CH',
      },
    });
    expect(res.statusCode).toBe(201);
    expect(await unverified.poll()).toEqual([]);
    expect((await verified.poll()).map((w) => w.job_id)).toEqual([res.json().job_id]);
    const nodes = (
      await t.app.inject({ method: 'GET', url: '/api/v1/nodes?country=CH', headers: bearer(operator.apiKey) })
    ).json().nodes;
    expect(nodes.map((n: { attestation: string }) => n.attestation).sort()).toEqual([
      'intel-tdx:unverified',
      'intel-tdx:verified',
    ]);
  });
});

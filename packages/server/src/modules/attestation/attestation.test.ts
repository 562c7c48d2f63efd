import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createSnpTestChain, type SnpTestChain } from '@svc/protocol/attestation/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  bearer,
  createKey,
  createTestApp,
  createTestNode,
  signUp,
  type TestApp,
  type TestBuyer,
  type TestNode,
} from '../../../test/harness.js';
import { createAttestationVerifier } from '../../platform/attestation.js';
import { expireLapsedAttestations } from './service.js';

const SNP = new URL('../../../../protocol/vectors/attestation/sev-snp/', import.meta.url);
const MEASUREMENT = Buffer.alloc(48, 0x42);

interface Challenge {
  challenge: string;
  expires_at: string;
  report_data: string;
}

describe('attestation: challenge, bound evidence, the sovereign pool', () => {
  let t: TestApp;
  let chain: SnpTestChain;
  let operatorKey: string;
  let buyer: TestBuyer;
  beforeAll(async () => {
    t = await createTestApp({
      env: { SVC_TEE_MEASUREMENTS: MEASUREMENT.toString('hex'), SVC_TEE_REATTEST_HOURS: '24' },
    });
    chain = await createSnpTestChain();
    // The test root is trusted here only: the default verifier (createContext) trusts AMD's roots alone.
    t.ctx.attestation = createAttestationVerifier(t.ctx.config.tee, { extraSnpRoots: [chain.pin] });
    const operator = await signUp(t.app);
    operatorKey = await createKey(t.app, operator, ['operator']);
    buyer = await signUp(t.app);
  });
  afterAll(() => t.close());

  const challenge = async (node: TestNode): Promise<Challenge> => {
    const res = await node.call('POST', '/api/v1/node/attestation/challenge');
    expect(res.statusCode).toBe(200);
    return res.json() as Challenge;
  };
  const submit = (
    node: TestNode,
    c: string,
    report: Buffer,
    vcek = chain.vcekDer,
    chainPem: string | null = chain.chainPem,
  ) =>
    node.call('POST', '/api/v1/node/attestation', {
      challenge: c,
      method: 2,
      sev_snp: {
        report: report.toString('base64'),
        vcek: vcek.toString('base64'),
        ...(chainPem ? { chain: chainPem } : {}),
      },
    });
  const failedChecks = (body: { checks: Array<{ name: string; ok: boolean }> }) =>
    body.checks.filter((c) => !c.ok).map((c) => c.name);
  const attestationOf = async (node: TestNode) => {
    const list = (
      await t.app.inject({ method: 'GET', url: '/api/v1/nodes?limit=200', headers: bearer(operatorKey) })
    ).json() as { nodes: Array<{ node_id: string; attestation: string }> };
    return list.nodes.find((n) => n.node_id === node.nodeId)?.attestation;
  };

  it('issues a single-use challenge to a signed node only; report_data is SHA-512(challenge || node public key)', async () => {
    const node = await createTestNode(t.app, operatorKey);
    const c = await challenge(node);
    expect(c.challenge).toMatch(/^[0-9a-f]{64}$/);
    expect(c.report_data).toBe(
      createHash('sha512')
        .update(Buffer.from(c.challenge, 'hex'))
        .update(Buffer.from(node.pubkey, 'hex'))
        .digest('hex'),
    );
    const ttl = Date.parse(c.expires_at) - Date.now();
    expect(ttl).toBeGreaterThan(9 * 60_000);
    expect(ttl).toBeLessThanOrEqual(10 * 60_000);
    expect((await t.app.inject({ method: 'POST', url: '/api/v1/node/attestation/challenge' })).statusCode).toBe(401);
  });

  it('verifies bound evidence under the test root: the node joins the pool and takes requires_tee work', async () => {
    const node = await createTestNode(t.app, operatorKey, { country: 'CH', attestation_method: 2 });
    const other = await createTestNode(t.app, operatorKey, { country: 'CH' });
    expect(await attestationOf(node)).toBe('amd-sev-snp:unverified');
    const c = await challenge(node);
    const res = await submit(
      node,
      c.challenge,
      chain.signReport({ reportData: Buffer.from(c.report_data, 'hex'), measurement: MEASUREMENT }),
    );
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(failedChecks(body)).toEqual([]);
    expect(body).toMatchObject({
      verified: true,
      attestation: 'amd-sev-snp:verified',
      method: 'amd-sev-snp',
      measurement: MEASUREMENT.toString('hex'),
      tcb_status: 'bootloader=3 tee=0 snp=8 microcode=115',
    });
    expect(body.checks.map((c: { name: string }) => c.name)).toEqual(
      expect.arrayContaining([
        'ark-pinned',
        'report-signature',
        'vcek-tcb',
        'policy-no-debug',
        'tcb-policy',
        'measurement-allowed',
        'binding',
      ]),
    );
    expect(Date.parse(body.expires_at) - Date.parse(body.verified_at)).toBe(24 * 3_600_000);
    expect(await attestationOf(node)).toBe('amd-sev-snp:verified');

    const job = await t.app.inject({
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
    expect(job.statusCode).toBe(201);
    expect(await other.poll()).toEqual([]);
    const [work] = await node.poll();
    expect(work?.job_id).toBe(job.json().job_id);
    if (!work) throw new Error('no work');

    // The receipt and the evidence of sovereign work carry the attestation summary.
    const summary = {
      method: 'amd-sev-snp',
      measurement: MEASUREMENT.toString('hex'),
      tcb_status: 'bootloader=3 tee=0 snp=8 microcode=115',
      verified_at: body.verified_at,
    };
    const receipt = await node.complete(work, '{"ok":true}', 3);
    expect(receipt.statusCode).toBe(200);
    expect(receipt.json().metadata.attestation).toEqual(summary);
    const graph = (
      await t.app.inject({ method: 'GET', url: `/api/v1/jobs/${work.job_id}/evidence`, headers: bearer(buyer.apiKey) })
    ).json();
    const submitted = JSON.stringify(graph).match(/"attestation":\{[^}]*\}/g) ?? [];
    expect(submitted.length).toBeGreaterThan(0);
    expect(submitted.every((a) => a.includes(MEASUREMENT.toString('hex')))).toBe(true);

    // The same challenge again: refused, single use.
    const again = await submit(
      node,
      c.challenge,
      chain.signReport({ reportData: Buffer.from(c.report_data, 'hex'), measurement: MEASUREMENT }),
    );
    expect(again.statusCode).toBe(400);
    expect(again.json()).toMatchObject({ error: 'invalid_request', details: [{ path: '/challenge' }] });
  });

  it('fails binding for evidence made for another challenge or another node, and the node leaves the pool', async () => {
    const node = await createTestNode(t.app, operatorKey, { attestation_method: 2 });
    const c1 = await challenge(node);
    expect(
      (
        await submit(
          node,
          c1.challenge,
          chain.signReport({ reportData: Buffer.from(c1.report_data, 'hex'), measurement: MEASUREMENT }),
        )
      ).json().verified,
    ).toBe(true);
    const c2 = await challenge(node);
    const stale = await submit(
      node,
      c2.challenge,
      chain.signReport({ reportData: Buffer.from(c1.report_data, 'hex'), measurement: MEASUREMENT }),
    );
    expect(failedChecks(stale.json())).toEqual(['binding']);
    expect(stale.json()).toMatchObject({ verified: false, attestation: 'amd-sev-snp:unverified', expires_at: null });
    expect(await attestationOf(node)).toBe('amd-sev-snp:unverified');
    const stranger = await createTestNode(t.app, operatorKey);
    const c3 = await challenge(node);
    const theirs = await challenge(stranger);
    const forOther = await submit(
      node,
      c3.challenge,
      chain.signReport({ reportData: Buffer.from(theirs.report_data, 'hex'), measurement: MEASUREMENT }),
    );
    expect(failedChecks(forOther.json())).toEqual(['binding']);
    // Another node's challenge cannot be spent by this node.
    expect(
      (
        await submit(
          node,
          theirs.challenge,
          chain.signReport({ reportData: Buffer.from(theirs.report_data, 'hex'), measurement: MEASUREMENT }),
        )
      ).statusCode,
    ).toBe(400);
  });

  it('refuses a measurement outside SVC_TEE_MEASUREMENTS, an expired challenge, and missing evidence', async () => {
    const node = await createTestNode(t.app, operatorKey, { attestation_method: 2 });
    const c = await challenge(node);
    const res = await submit(
      node,
      c.challenge,
      chain.signReport({ reportData: Buffer.from(c.report_data, 'hex'), measurement: Buffer.alloc(48, 0x43) }),
    );
    expect(failedChecks(res.json())).toEqual(['measurement-allowed']);
    const old = await challenge(node);
    await t.ctx.db.query(
      "UPDATE attestation_challenges SET expires_at = now() - interval '1 second' WHERE challenge = $1",
      [old.challenge],
    );
    expect(
      (
        await submit(
          node,
          old.challenge,
          chain.signReport({ reportData: Buffer.from(old.report_data, 'hex'), measurement: MEASUREMENT }),
        )
      ).statusCode,
    ).toBe(400);
    const c2 = await challenge(node);
    const noEvidence = await node.call('POST', '/api/v1/node/attestation', { challenge: c2.challenge, method: 1 });
    expect(noEvidence.statusCode).toBe(400);
    expect(noEvidence.json().details).toEqual([{ path: '/tdx', message: 'is required for method 1 (Intel TDX)' }]);
  });

  it('the real AMD vector passes chain and signature but not policy, allowlist or binding', async () => {
    const node = await createTestNode(t.app, operatorKey, { attestation_method: 2 });
    const c = await challenge(node);
    const res = await submit(
      node,
      c.challenge,
      readFileSync(new URL('attestation.bin', SNP)),
      readFileSync(new URL('vcek.testcer', SNP)),
      null,
    );
    expect(res.statusCode).toBe(200);
    expect(failedChecks(res.json())).toEqual(['policy-no-debug', 'measurement-allowed', 'binding']);
    expect(
      res
        .json()
        .checks.filter((x: { ok: boolean; name: string }) => x.ok)
        .map((x: { name: string }) => x.name),
    ).toEqual(expect.arrayContaining(['ark-pinned', 'vcek-signed-by-ask', 'report-signature']));
  });

  it('an expired verification leaves the pool: listed as expired, no sovereign work', async () => {
    const node = await createTestNode(t.app, operatorKey, { country: 'LI', attestation_method: 2 });
    const c = await challenge(node);
    expect(
      (
        await submit(
          node,
          c.challenge,
          chain.signReport({ reportData: Buffer.from(c.report_data, 'hex'), measurement: MEASUREMENT }),
        )
      ).json().verified,
    ).toBe(true);
    await t.ctx.db.query("UPDATE nodes SET attestation_expires_at = now() - interval '1 second' WHERE id = $1", [
      node.nodeId,
    ]);
    expect(await attestationOf(node)).toBe('amd-sev-snp:expired');
    // No verified node can take a sovereign job in LI now: refused at submission, nothing held.
    const balance = async () =>
      (await t.app.inject({ method: 'GET', url: '/api/v1/billing/balance', headers: bearer(buyer.apiKey) })).json();
    const before = await balance();
    const job = await t.app.inject({
      method: 'POST',
      url: '/api/v1/marketplace/jobs',
      headers: bearer(buyer.apiKey),
      payload: {
        kind: 1,
        budget: 0.1,
        max_price_per_unit: 0.00001,
        currency: 'CAD',
        inline_text: 'x',
        requires_tee: true,
        strict_jurisdiction: 'LI',
      },
    });
    expect(job.statusCode).toBe(503);
    expect(job.json()).toMatchObject({
      error: 'no_capacity',
      message: expect.stringContaining('sovereign job refused'),
    });
    expect(await balance()).toEqual(before);
    expect(await node.poll()).toEqual([]);
    await expireLapsedAttestations(t.ctx);
    const { rows } = await t.ctx.db.query<{ attestation_verified: boolean }>(
      'SELECT attestation_verified FROM nodes WHERE id = $1',
      [node.nodeId],
    );
    expect(rows[0]?.attestation_verified).toBe(false);
    expect(await attestationOf(node)).toBe('amd-sev-snp:expired');
  });

  it('kind 7 goes through the process runner to a verified GPU node only, metered in GPU-seconds', async () => {
    const plain = await createTestNode(t.app, operatorKey, {
      country: 'IS',
      gpu_model: 'NVIDIA H100',
      capabilities: ['process'],
    });
    const refused = await t.app.inject({
      method: 'POST',
      url: '/api/v1/marketplace/jobs',
      headers: bearer(buyer.apiKey),
      payload: {
        kind: 7,
        budget: 1,
        max_price_per_unit: 0.01,
        currency: 'CAD',
        runner_args: ['true'],
        strict_jurisdiction: 'IS',
        estimated_gpu_seconds: 10,
      },
    });
    expect(refused.statusCode).toBe(503);
    const node = await createTestNode(t.app, operatorKey, {
      country: 'IS',
      gpu_model: 'NVIDIA H100',
      capabilities: ['process'],
      attestation_method: 2,
    });
    const c = await challenge(node);
    expect(
      (
        await submit(
          node,
          c.challenge,
          chain.signReport({ reportData: Buffer.from(c.report_data, 'hex'), measurement: MEASUREMENT }),
        )
      ).json().verified,
    ).toBe(true);
    const res = await t.app.inject({
      method: 'POST',
      url: '/api/v1/marketplace/jobs',
      headers: bearer(buyer.apiKey),
      payload: {
        kind: 7,
        budget: 1,
        max_price_per_unit: 0.01,
        currency: 'CAD',
        runner_args: ['true'],
        strict_jurisdiction: 'IS',
        estimated_gpu_seconds: 10,
      },
    });
    expect(res.statusCode).toBe(201);
    expect(await plain.poll()).toEqual([]);
    const [work] = await node.poll();
    expect(work).toMatchObject({ job_id: res.json().job_id, kind: 7, payload: { runner_args: ['true'] } });
  });

  it('garbage evidence is a failed verification or a 400, never a 500', async () => {
    const node = await createTestNode(t.app, operatorKey, { attestation_method: 1 });
    const junk = Buffer.from('not evidence at all').toString('base64');
    const bodies = (c: string) => [
      {
        challenge: c,
        method: 2,
        sev_snp: { report: junk, vcek: junk, chain: '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n' },
      },
      {
        challenge: c,
        method: 1,
        tdx: {
          quote: junk,
          collateral: { tcb_info: '{}', qe_identity: 'x', tcb_signing_chain: 'x', pck_crl: junk, root_crl: '' },
        },
      },
      { challenge: c, method: 3 },
    ];
    for (const i of [0, 1, 2]) {
      const c = await challenge(node);
      const res = await node.call('POST', '/api/v1/node/attestation', bodies(c.challenge)[i]);
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json().verified).toBe(false);
    }
    for (const body of [
      {},
      { challenge: 'zz', method: 2 },
      { challenge: '00'.repeat(32), method: 9 },
      { challenge: '00'.repeat(32), method: 2, sev_snp: { report: '!!', vcek: '' } },
    ]) {
      expect((await node.call('POST', '/api/v1/node/attestation', body)).statusCode).toBe(400);
    }
  });

  it('the real Intel v4 quote through the route: signatures and chain pass, the 2023 collateral and binding do not', async () => {
    const node = await createTestNode(t.app, operatorKey, { attestation_method: 1 });
    const c = await challenge(node);
    const tdx = new URL('../../../../protocol/vectors/attestation/tdx/', import.meta.url);
    const read = (name: string) => readFileSync(new URL(name, tdx));
    const res = await node.call('POST', '/api/v1/node/attestation', {
      challenge: c.challenge,
      method: 1,
      tdx: {
        quote: read('tdx_prod_quote_SPR_E4.dat').toString('base64'),
        collateral: {
          tcb_info: read('sample_tcbInfo_response').toString('utf8'),
          qe_identity: read('sample_qeIdentity_response').toString('utf8'),
          tcb_signing_chain: readFileSync(
            new URL('../../../../protocol/src/attestation/testdata/tcb_signing.pem', import.meta.url),
            'utf8',
          ),
          pck_crl: read('pckcrl').toString('base64'),
          root_crl: read('rootcrl.der').toString('base64'),
        },
      },
    });
    expect(res.statusCode).toBe(200);
    const checks = res.json().checks as Array<{ name: string; ok: boolean }>;
    const passed = checks.filter((x) => x.ok).map((x) => x.name);
    expect(passed).toEqual(
      expect.arrayContaining([
        'quote-structure',
        'root-pinned',
        'pck-chain-signatures',
        'qe-report-signature',
        'qe-report-binds-key',
        'quote-signature',
        'td-no-debug',
      ]),
    );
    // Judged now (2026), the collateral of 2023 is stale and its signing certificate expired in 2025.
    expect(failedChecks(res.json())).toEqual(
      expect.arrayContaining([
        'crl-signatures',
        'tcb-signing-chain',
        'tcb-status',
        'tcb-policy',
        'measurement-allowed',
        'binding',
      ]),
    );
    expect(res.json()).toMatchObject({
      verified: false,
      attestation: 'intel-tdx:unverified',
      measurement: '6363b8043668a3ad953278e10389574d326c6749fb78aa810ecd9336923db86f22fc00b8dcd404bc10d5e119d7215cbb',
    });
  });
});

import { generateEd25519, requestMessage, sha256Hex, signHex, signSvc1, svc1Message } from '@svc/protocol';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  bearer,
  createKey,
  createTestApp,
  createTestNode,
  signUp,
  type TestApp,
  type TestBuyer,
  type TestNode,
  type WorkItem,
} from '../../../test/harness.js';
import { INLINE_RESULT_MAX_BYTES, readWorkResult } from '../work/results.js';

describe('receipts and node requests are verified strictly; refused ones charge nothing', () => {
  let t: TestApp;
  let buyer: TestBuyer;
  let node: TestNode;
  let other: TestNode;
  let work: WorkItem;
  const output = '{"answer":42}';
  /**
   * 2,000 tokens at the 0.05 micro-CAD floor: 100 micro-CAD, under the job's metering bound (one
   * input: its tokens, the default model's 2,048-token completion and the margin, 2,322).
   */
  const UNITS = 2_000;
  const balance = async () =>
    (await t.app.inject({ method: 'GET', url: '/api/v1/billing/balance', headers: bearer(buyer.apiKey) })).json();

  beforeAll(async () => {
    t = await createTestApp();
    buyer = await signUp(t.app);
    const operator = await signUp(t.app);
    const key = await createKey(t.app, operator, ['operator']);
    node = await createTestNode(t.app, key);
    other = await createTestNode(t.app, key);
    await t.app.inject({
      method: 'POST',
      url: '/api/v1/marketplace/jobs',
      headers: bearer(buyer.apiKey),
      payload: { kind: 1, budget: 1, max_price_per_unit: 0.00001, currency: 'CAD', inline_text: 'hi' },
    });
    const [w] = await node.poll();
    if (!w) throw new Error('no work');
    work = w;
  });
  afterAll(() => t.close());

  it('refuses node requests with a bad signature, a stale timestamp, an unknown node or a replay', async () => {
    const badSig = await node.call(
      'POST',
      '/api/v1/node/heartbeat',
      { active_work: [] },
      { signature: 'ab'.repeat(64) },
    );
    expect(badSig.statusCode).toBe(401);
    expect(badSig.json().message).toContain('bad signature');
    const stale = await node.call(
      'POST',
      '/api/v1/node/heartbeat',
      { active_work: [] },
      { timestamp: Date.now() - 61_000 },
    );
    expect(stale.json().message).toContain('60 s');
    // Same bytes, same timestamp, same signature: a replay.
    const ts = Date.now();
    const first = await node.call('POST', '/api/v1/node/heartbeat', { active_work: [] }, { timestamp: ts });
    expect(first.statusCode).toBe(200);
    const again = await node.call('POST', '/api/v1/node/heartbeat', { active_work: [] }, { timestamp: ts });
    expect(again.statusCode).toBe(401);
    expect(again.json().message).toContain('replayed');
    // The signature covers the body: another body under a signature for the first fails.
    const ts2 = Date.now() + 1;
    const sigForFirstBody = signHex(
      requestMessage({
        method: 'POST',
        pathWithQuery: '/api/v1/node/heartbeat',
        timestamp: ts2,
        body: JSON.stringify({ active_work: [] }),
      }),
      node.privateKey,
    );
    const tampered = await node.call(
      'POST',
      '/api/v1/node/heartbeat',
      { active_work: ['x'] },
      { timestamp: ts2, signature: sigForFirstBody },
    );
    expect(tampered.statusCode).toBe(401);
    expect(tampered.json().message).toContain('bad signature');
  });

  it("a known node's signed call costs one store statement: nonce and current row together", async () => {
    expect((await node.call('POST', '/api/v1/node/heartbeat', { active_work: [] })).statusCode).toBe(200);
    const queries = vi.spyOn(t.ctx.db, 'query');
    try {
      const res = await node.call('GET', '/api/v1/node/work?wait_ms=0&max=1');
      expect(res.statusCode).toBe(200);
      const auth = queries.mock.calls
        .map(([sql]) => sql)
        // The node directory's refresh, once a second, may land in the window: its full read (the
        // routing columns) or its liveness news (id, last_seen of recently seen nodes). Not auth.
        .filter(
          (sql) =>
            sql.includes('node_request_nonces') ||
            (/FROM nodes\b/.test(sql) && !/SELECT (id, org_id, country|id, last_seen FROM)\b/.test(sql)),
        );
      expect(auth).toEqual([expect.stringContaining('node_request_nonces')]);
    } finally {
      queries.mockRestore();
    }
  });

  it('refuses a result whose bytes do not hash to result_hash', async () => {
    const res = await node.call('POST', `/api/v1/node/work/${work.work_id}/result`, {
      output,
      encoding: 'utf8',
      result_hash: sha256Hex('something else'),
      metering_units: UNITS,
    });
    expect(res.statusCode).toBe(400);
  });

  it('refuses a receipt before the result is delivered', async () => {
    const res = await node.receipt(work, { result_hash: sha256Hex(output), metering_units: UNITS });
    expect(res.statusCode).toBe(409);
  });

  it('refuses work leased to another node (404), a forged receipt, a mismatched hash, and a receipt under another pubkey', async () => {
    expect((await other.deliver(work, output, UNITS)).statusCode).toBe(404);
    expect((await node.deliver(work, output, UNITS)).statusCode).toBe(200);
    expect((await node.deliver(work, output, UNITS)).statusCode).toBe(200); // identical re-upload
    expect((await node.deliver(work, `${output} `, UNITS)).statusCode).toBe(409); // a different result
    const forger = generateEd25519().privateKey;
    const forged = signHex(
      svc1Message({
        job_id: work.job_id,
        node_public_key_hex: node.pubkey,
        result_hash_hex: sha256Hex(output),
        metering_units: UNITS,
      }),
      forger,
    );
    const f = await node.receipt(work, { result_hash: sha256Hex(output), metering_units: UNITS, signature: forged });
    expect(f.statusCode).toBe(400);
    expect(f.json().message).toContain('does not verify');
    const mismatched = await node.receipt(work, { result_hash: sha256Hex('other'), metering_units: UNITS });
    expect(mismatched.statusCode).toBe(400);
    expect(mismatched.json().message).toContain('differs from the delivered result');
    const units = await node.receipt(work, {
      result_hash: sha256Hex(output),
      metering_units: UNITS,
      signature: signSvc1(
        {
          job_id: work.job_id,
          node_public_key_hex: node.pubkey,
          result_hash_hex: sha256Hex(output),
          metering_units: UNITS + 1,
        },
        node.privateKey,
      ),
    });
    expect(units.statusCode).toBe(400);
    expect((await other.receipt(work, { result_hash: sha256Hex(output), metering_units: UNITS })).statusCode).toBe(404);
    expect(
      (await node.receipt(work, { result_hash: sha256Hex(output), metering_units: UNITS, pubkey: other.pubkey }))
        .statusCode,
    ).toBe(403);
    expect(await balance()).toMatchObject({ balance_cents: 500, held_cents: 100 });
  });

  it('accepts the genuine receipt once; a second one is 409 and charges nothing more', async () => {
    const ok = await node.receipt(work, { result_hash: sha256Hex(output), metering_units: UNITS });
    expect(ok.statusCode).toBe(200);
    const after = await balance();
    const dup = await node.receipt(work, { result_hash: sha256Hex(output), metering_units: UNITS });
    expect(dup.statusCode).toBe(409);
    expect(await balance()).toEqual(after);
    const rows = await t.ctx.db.query<{ n: number; micro: string }>(
      "SELECT count(*)::int AS n, sum(amount_micro)::text AS micro FROM credit_transactions WHERE tx_type = 'charge'",
    );
    expect(rows.rows[0]).toEqual({ n: 1, micro: '-100' });
    // Less than a cent: nothing leaves the balance yet, the remainder is carried (DESIGN.md section 7).
    expect(after).toMatchObject({ balance_cents: 500, held_cents: 0 });
  });
});

describe('a receipt may carry its result inline', () => {
  let t: TestApp;
  let buyer: TestBuyer;
  let node: TestNode;
  beforeAll(async () => {
    t = await createTestApp();
    buyer = await signUp(t.app);
    const operator = await signUp(t.app);
    node = await createTestNode(t.app, await createKey(t.app, operator, ['operator']));
  });
  afterAll(() => t.close());

  const leaseOne = async (): Promise<WorkItem> => {
    await t.app.inject({
      method: 'POST',
      url: '/api/v1/marketplace/jobs',
      headers: bearer(buyer.apiKey),
      payload: { kind: 1, budget: 1, max_price_per_unit: 0.00001, currency: 'CAD', inline_text: 'hi' },
    });
    const [w] = await node.poll();
    if (!w) throw new Error('no work');
    return w;
  };
  const upload = (output: string, hash = sha256Hex(output)) => ({
    output,
    encoding: 'utf8',
    content_type: 'application/json',
    result_hash: hash,
    metering_units: 10,
  });
  const storedResult = async (workId: string) => (await readWorkResult(t.ctx, workId))?.bytes.toString('utf8');

  it('stores the result and accepts the receipt in one call', async () => {
    const work = await leaseOne();
    const output = '{"inline":true}';
    const res = await node.receipt(work, {
      result_hash: sha256Hex(output),
      metering_units: 10,
      result: upload(output),
    });
    expect(res.statusCode).toBe(200);
    expect(await storedResult(work.work_id)).toBe(output);
    const job = (
      await t.app.inject({
        method: 'GET',
        url: `/api/v1/marketplace/jobs/${work.job_id}`,
        headers: bearer(buyer.apiKey),
      })
    ).json();
    expect(job).toMatchObject({ status: 'completed', result_hash: sha256Hex(output) });
  });

  it('keeps a result of up to 64 KiB in its work row, a larger one as an object, and serves both', async () => {
    const download = async (jobId: string) =>
      (
        await t.app.inject({
          method: 'GET',
          url: `/api/v1/marketplace/jobs/${jobId}/result`,
          headers: bearer(buyer.apiKey),
        })
      ).body;
    const inlineOf = async (workId: string) =>
      (
        await t.ctx.db.query<{ result_inline: Uint8Array | null }>(
          'SELECT result_inline FROM work_items WHERE id = $1',
          [workId],
        )
      ).rows[0]?.result_inline ?? null;
    const sizes = [
      { output: `"${'s'.repeat(INLINE_RESULT_MAX_BYTES - 2)}"`, inRow: true },
      { output: `"${'l'.repeat(INLINE_RESULT_MAX_BYTES - 1)}"`, inRow: false },
    ];
    for (const { output, inRow } of sizes) {
      const work = await leaseOne();
      const res = await node.receipt(work, {
        result_hash: sha256Hex(output),
        metering_units: 10,
        result: upload(output),
      });
      expect(res.statusCode).toBe(200);
      expect(Buffer.from((await inlineOf(work.work_id)) ?? []).toString('utf8')).toBe(inRow ? output : '');
      expect((await t.ctx.blobs.get(`results/${work.work_id}`))?.bytes.toString('utf8')).toBe(
        inRow ? undefined : output,
      );
      expect(await download(work.job_id)).toBe(output);
    }
    // A result stored before results were kept in rows is an object only: still served.
    const work = await leaseOne();
    const old = '{"stored":"as an object"}';
    expect(
      (await node.receipt(work, { result_hash: sha256Hex(old), metering_units: 10, result: upload(old) })).statusCode,
    ).toBe(200);
    await t.ctx.blobs.put(`results/${work.work_id}`, Buffer.from(old), 'application/json');
    await t.ctx.db.query('UPDATE work_items SET result_inline = NULL WHERE id = $1', [work.work_id]);
    expect(await download(work.job_id)).toBe(old);
  });

  it('refuses an inline result whose bytes do not hash, or that is not the receipted one, and stores nothing', async () => {
    const work = await leaseOne();
    const output = '{"inline":2}';
    const badBytes = await node.receipt(work, {
      result_hash: sha256Hex(output),
      metering_units: 10,
      result: upload('{"other":1}', sha256Hex(output)),
    });
    expect(badBytes.statusCode).toBe(400);
    expect(badBytes.json().details).toEqual([{ path: '/result/result_hash', message: 'does not match the output' }]);
    const otherResult = await node.receipt(work, {
      result_hash: sha256Hex(output),
      metering_units: 10,
      result: upload('{"other":1}'),
    });
    expect(otherResult.statusCode).toBe(400);
    expect(otherResult.json().details).toEqual([{ path: '/result/result_hash', message: 'differs from /result_hash' }]);
    expect(await storedResult(work.work_id)).toBeUndefined();
    const job = (
      await t.app.inject({
        method: 'GET',
        url: `/api/v1/marketplace/jobs/${work.job_id}`,
        headers: bearer(buyer.apiKey),
      })
    ).json();
    expect(job.status).not.toBe('completed');
  });

  it('accepts an inline result already delivered by POST .../result, and refuses one that differs from it', async () => {
    const work = await leaseOne();
    const output = '{"inline":3}';
    expect((await node.deliver(work, output, 10)).statusCode).toBe(200);
    const different = '{"inline":4}';
    const refused = await node.receipt(work, {
      result_hash: sha256Hex(different),
      metering_units: 10,
      result: upload(different),
    });
    expect(refused.statusCode).toBe(400);
    expect(refused.json().message).toContain('differs from the delivered result');
    const same = await node.receipt(work, {
      result_hash: sha256Hex(output),
      metering_units: 10,
      result: upload(output),
    });
    expect(same.statusCode).toBe(200);
    expect(await storedResult(work.work_id)).toBe(output);
  });
});

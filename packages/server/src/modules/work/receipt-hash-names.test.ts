import { sha256Hex, signSvc1 } from '@svc/protocol';
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
  type WorkItem,
} from '../../../test/harness.js';

/**
 * The spec's NodeReceiptRequest carries the result hash as `result_hash` or `result_hash_hex`:
 * either name is accepted, the SVC1 signature needs one of them (issue 41 point 7).
 */
describe('a node receipt names its result hash result_hash or result_hash_hex', () => {
  let t: TestApp;
  let buyer: TestBuyer;
  let node: TestNode;
  let work: WorkItem;
  const output = '{"answer":42}';
  const UNITS = 1000;
  const hash = sha256Hex(output);
  const balance = async () =>
    (await t.app.inject({ method: 'GET', url: '/api/v1/billing/balance', headers: bearer(buyer.apiKey) })).json();
  const receipt = (fields: Record<string, unknown>) =>
    node.call('POST', '/api/v1/node/receipt', {
      job_id: work.job_id,
      pubkey: node.pubkey,
      metering_units: UNITS,
      signature: signSvc1(
        { job_id: work.job_id, node_public_key_hex: node.pubkey, result_hash_hex: hash, metering_units: UNITS },
        node.privateKey,
      ),
      ...fields,
    });

  beforeAll(async () => {
    t = await createTestApp();
    buyer = await signUp(t.app);
    const operator = await signUp(t.app);
    node = await createTestNode(t.app, await createKey(t.app, operator, ['operator']));
    const job = await t.app.inject({
      method: 'POST',
      url: '/api/v1/marketplace/jobs',
      headers: bearer(buyer.apiKey),
      payload: { kind: 1, budget: 1, max_price_per_unit: 0.00001, currency: 'CAD', inline_text: 'hi' },
    });
    expect(job.statusCode).toBe(201);
    const [w] = await node.poll();
    if (!w) throw new Error('no work');
    work = w;
    expect((await node.deliver(work, output, UNITS)).statusCode).toBe(200);
  });
  afterAll(() => t.close());

  it('refuses a receipt with neither name (400 /result_hash) and two names that differ (400 /result_hash_hex), charging nothing', async () => {
    const before = await balance();
    const neither = await receipt({});
    expect(neither.statusCode).toBe(400);
    expect(neither.json()).toMatchObject({
      error: 'invalid_request',
      details: [{ path: '/result_hash', message: "must have required property 'result_hash'" }],
    });
    expect(neither.json().message).toContain('result_hash_hex');
    const differ = await receipt({ result_hash: hash, result_hash_hex: sha256Hex('other') });
    expect(differ.statusCode).toBe(400);
    expect(differ.json().details).toEqual([{ path: '/result_hash_hex', message: 'differs from /result_hash' }]);
    expect(await balance()).toEqual(before);
  });

  it('accepts the hash under result_hash_hex alone, stored as the receipt result_hash', async () => {
    const res = await receipt({ result_hash_hex: hash });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ job_id: work.job_id, result_hash: hash, metering_units: UNITS });
    const again = await receipt({ result_hash: hash, result_hash_hex: hash });
    expect(again.statusCode).toBe(409);
  });
});

import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createKey, createTestApp, createTestNode, signUp, type TestApp } from '../../../test/harness.js';

const vectors = JSON.parse(
  readFileSync(new URL('../../../../protocol/vectors/ed25519-weak-public-keys.json', import.meta.url), 'utf8'),
) as {
  small_order_canonical: { hex: string; order: number }[];
  small_order_non_canonical: { hex: string }[];
};
const IDENTITY = `01${'00'.repeat(31)}`;
/** R = identity, S = 0: verifies for any message under the identity key with plain node:crypto. */
const FORGED = `01${'00'.repeat(63)}`;

describe('nodes: small-order and non-canonical Ed25519 keys are refused', () => {
  let t: TestApp;
  let operatorKey: string;
  beforeAll(async () => {
    t = await createTestApp();
    operatorKey = await createKey(t.app, await signUp(t.app), ['operator']);
  });
  afterAll(() => t.close());

  it('registration with the identity point is a 400 that says why', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/api/v1/node/register',
      headers: bearer(operatorKey),
      payload: { pubkey: IDENTITY, country: 'CA', signature: FORGED },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({
      error: 'invalid_request',
      message: 'pubkey is a small-order point (order 1): signatures under it can be forged',
      details: [{ path: '/pubkey', message: 'is a small-order point (order 1): signatures under it can be forged' }],
    });
  });

  it('every published small-order encoding is refused at registration', async () => {
    for (const { hex } of [...vectors.small_order_canonical, ...vectors.small_order_non_canonical]) {
      const res = await t.app.inject({
        method: 'POST',
        url: '/api/v1/node/register',
        headers: bearer(operatorKey),
        payload: { pubkey: hex, signature: FORGED },
      });
      expect([hex, res.statusCode, res.json().message]).toEqual([
        hex,
        400,
        expect.stringMatching(/^pubkey is (a small-order point|a non-canonical encoding)/),
      ]);
    }
    const { rows } = await t.ctx.db.query<{ n: number }>('SELECT count(*)::int AS n FROM nodes');
    expect(rows[0]?.n).toBe(0);
  });

  it('a node whose stored key is the identity (registered before this check) cannot sign requests or receipts', async () => {
    const node = await createTestNode(t.app, operatorKey);
    await t.ctx.db.query('UPDATE nodes SET pubkey = $1 WHERE id = $2', [IDENTITY, node.nodeId]);
    const heartbeat = await node.call(
      'POST',
      '/api/v1/node/heartbeat',
      { load: 0, active_work: [] },
      { signature: FORGED },
    );
    expect([heartbeat.statusCode, heartbeat.json().message]).toEqual([401, expect.stringMatching(/bad signature/)]);
  });
});

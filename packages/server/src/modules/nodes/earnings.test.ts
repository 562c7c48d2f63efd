import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGatewayFixture, type GatewayFixture, type GatewayNode } from '../../../test/gateway-fixture.js';

describe('GET /api/v1/nodes/earnings: what the organization nodes earned', () => {
  let f: GatewayFixture;
  let node: GatewayNode;
  let operatorOrg: string;
  beforeAll(async () => {
    f = await startGatewayFixture();
    node = await f.addNode({ country: 'CA' });
    operatorOrg = (
      (await f.api('GET', '/api/v1/auth/me', undefined, f.operatorKey)).json.organization as { id: string }
    ).id;
  });
  afterAll(() => f.close());

  it('sums the earning rows per node that did the work, through the request each row pays for', async () => {
    const empty = await f.api('GET', '/api/v1/nodes/earnings', undefined, f.operatorKey);
    expect(empty.status).toBe(200);
    const before = Number(empty.json.total_cents);
    const done = await f
      .openai()
      .chat.completions.create({ model: 'tinyllama', messages: [{ role: 'user', content: 'earn something' }] });
    // A one-word answer costs less than a cent, so settlement posted no earning row; post the
    // one a larger request would have, on the request the node really served.
    await f.server.ctx.ledger.credit(operatorOrg, 17, {
      txType: 'earning',
      description: `chat ${done.id} on ${node.nodeId}`,
      ref: done.id,
    });
    await f.server.ctx.ledger.credit(operatorOrg, 500, {
      txType: 'topup',
      description: 'not an earning',
      ref: done.id,
    });
    const res = await f.api('GET', '/api/v1/nodes/earnings', undefined, f.operatorKey);
    expect(res.json.currency).toBe('CAD');
    expect(res.json.total_cents).toBe(before + 17);
    const mine = (res.json.nodes as { node_id: string; earned_cents: number; work_items: number }[]).find(
      (n) => n.node_id === node.nodeId,
    );
    expect(mine?.earned_cents).toBe(before + 17);
    expect(mine?.work_items).toBeGreaterThanOrEqual(1);
  });

  it('shows a buyer without nodes nothing, and a buyer key (no payouts scope) is refused', async () => {
    const session = (await f.api('POST', '/api/v1/auth/login', { email: f.buyer.email, password: f.buyer.password }))
      .json.token as string;
    expect((await f.api('GET', '/api/v1/nodes/earnings', undefined, session)).json).toEqual({
      currency: 'CAD',
      total_cents: 0,
      payable_cents: 0,
      payable: 0,
      non_payable_micro: 0,
      nodes: [],
    });
    expect((await f.api('GET', '/api/v1/nodes/earnings')).status).toBe(403);
  });
});

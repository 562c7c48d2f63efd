import { usageCostMicro } from '@svc/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signUp } from '../../../test/harness.js';
import { startGatewayFixture, type GatewayFixture, type GatewayNode } from '../../../test/gateway-fixture.js';

interface RequestRecord {
  id: string;
  type: string;
  model: string;
  stream: boolean;
  status: string;
  node_id: string | null;
  country: string | null;
  receipt_id: string | null;
  charged_cents: number | null;
  charged_micro: number | null;
}

describe('GET /api/v1/gateway/requests: the organization gateway calls, with a real node agent', () => {
  let f: GatewayFixture;
  let node: GatewayNode;
  beforeAll(async () => {
    f = await startGatewayFixture();
    node = await f.addNode({ country: 'DE', region: 'eu-central' });
  });
  afterAll(() => f.close());

  it('lists completions newest first with the node, its country, the receipt and the charge', async () => {
    const client = f.openai();
    const first = await client.chat.completions.create({
      model: 'tinyllama',
      messages: [{ role: 'user', content: 'first' }],
    });
    const second = await client.embeddings.create({ model: 'all-MiniLM-L6-v2', input: 'second' });
    const res = await f.api('GET', '/api/v1/gateway/requests?limit=10');
    expect(res.status).toBe(200);
    const requests = res.json.requests as RequestRecord[];
    expect(res.json.total).toBe(2);
    expect(requests.map((r) => r.id)).toEqual([(second as unknown as { id: string }).id, first.id]);
    const chat = requests[1];
    const receipt = (await f.api('GET', `/api/v1/job/receipts/${first.id}`)).json.receipts as { id: string }[];
    expect(chat).toMatchObject({
      type: 'chat',
      model: 'tinyllama',
      stream: false,
      status: 'completed',
      node_id: node.nodeId,
      country: 'DE',
      receipt_id: receipt[0]?.id,
    });
    expect(typeof chat?.charged_cents).toBe('number');
    // The exact charge beside the whole cents: the catalogue price of the signed usage.
    const exact = usageCostMicro('tinyllama', {
      prompt_tokens: first.usage?.prompt_tokens ?? 0,
      completion_tokens: first.usage?.completion_tokens ?? 0,
    });
    expect(exact).toBeGreaterThan(0);
    expect(chat).toMatchObject({ charged_micro: exact, charged: exact / 1_000_000 });
    const { rows } = await f.server.ctx.db.query<{ tx_type: string; amount_micro: number; hold_cents: number }>(
      'SELECT tx_type, amount_micro, hold_cents FROM credit_transactions WHERE org_id = $1 AND ref = $2 ORDER BY seq',
      [f.buyer.orgId, first.id],
    );
    // Its charge alone: no hold and no release row (DESIGN.md section 7, revised 2026-11-27).
    expect(rows.map((r) => [r.tx_type, r.amount_micro])).toEqual([['charge', -exact]]);
    expect(requests[0]).toMatchObject({
      type: 'embeddings',
      model: 'all-MiniLM-L6-v2',
      status: 'completed',
      country: 'DE',
    });
  });

  it('pages and filters by status, and refuses unknown parameters', async () => {
    const page = await f.api('GET', '/api/v1/gateway/requests?limit=1&offset=1');
    expect(page.json).toMatchObject({ total: 2, limit: 1, offset: 1 });
    expect((page.json.requests as RequestRecord[])[0]?.type).toBe('chat');
    expect((await f.api('GET', '/api/v1/gateway/requests?status=failed')).json).toMatchObject({
      requests: [],
      total: 0,
    });
    expect((await f.api('GET', '/api/v1/gateway/requests?status=nope')).status).toBe(400);
    expect((await f.api('GET', '/api/v1/gateway/requests?limit=201')).status).toBe(400);
  });

  it("never shows another organization's requests", async () => {
    const other = await signUp(f.server.app);
    expect((await f.api('GET', '/api/v1/gateway/requests', undefined, other.apiKey)).json).toMatchObject({
      requests: [],
      total: 0,
    });
  });
});

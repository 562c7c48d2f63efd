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

interface Summary {
  node_id: string;
  name: string;
  country: string;
  models: string[];
  status: string;
}

/** `GET /api/v1/nodes`: the caller's organization's nodes; `scope=all`: the public capacity, for any key. */
describe('GET /api/v1/nodes: mine, or the public capacity with scope=all', () => {
  let t: TestApp;
  let acme: TestBuyer;
  let acmeKey: string;
  let otherKey: string;
  let buyer: TestBuyer;
  let acmeNode = '';
  let otherNode = '';
  beforeAll(async () => {
    t = await createTestApp();
    acme = await signUp(t.app);
    acmeKey = await createKey(t.app, acme, ['operator']);
    otherKey = await createKey(t.app, await signUp(t.app), ['operator']);
    buyer = await signUp(t.app);
    acmeNode = (await createTestNode(t.app, acmeKey, { name: 'acme-rack-7', country: 'CA', models: ['tinyllama'] }))
      .nodeId;
    otherNode = (await createTestNode(t.app, otherKey, { name: 'other-gpu', country: 'FR', models: ['phi-4'] })).nodeId;
  });
  afterAll(() => t.close());

  const list = (key: string, query = '') =>
    t.app.inject({ method: 'GET', url: `/api/v1/nodes${query}`, headers: bearer(key) });

  it("an operator key lists its organization's nodes only, with their names", async () => {
    const mine = (await list(acmeKey)).json() as { nodes: Summary[]; total: number };
    expect(mine.total).toBe(1);
    expect(mine.nodes.map((n) => [n.node_id, n.name])).toEqual([[acmeNode, 'acme-rack-7']]);
  });

  it('a buyer key sees the public capacity with scope=all (countries, models; no operator name or organization); without it, its own (none)', async () => {
    // A buyer key (no operator scope): its own organization has no nodes.
    expect((await list(buyer.apiKey)).json()).toEqual({ nodes: [], total: 0 });
    const all = await list(buyer.apiKey, '?scope=all');
    expect(all.statusCode).toBe(200);
    const body = all.json() as { nodes: (Summary & Record<string, unknown>)[]; total: number };
    expect(body.total).toBe(2);
    expect(body.nodes.map((n) => [n.node_id, n.country, n.models, n.status, n.name]).sort()).toEqual(
      [
        [acmeNode, 'CA', ['tinyllama'], 'online', ''],
        [otherNode, 'FR', ['phi-4'], 'online', ''],
      ].sort(),
    );
    for (const n of body.nodes) expect(Object.keys(n).filter((k) => /org|owner|operator|buyer/.test(k))).toEqual([]);
    const inFrance = (await list(buyer.apiKey, '?scope=all&country=FR')).json() as { nodes: Summary[] };
    expect(inFrance.nodes.map((n) => n.node_id)).toEqual([otherNode]);
  });

  it("scope=all shows the caller's own node with its name, and others' without", async () => {
    const all = (await list(acmeKey, '?scope=all')).json() as { nodes: Summary[] };
    expect(Object.fromEntries(all.nodes.map((n) => [n.node_id, n.name]))).toEqual({
      [acmeNode]: 'acme-rack-7',
      [otherNode]: '',
    });
  });
});

import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  bearer,
  createKey,
  createTestApp,
  createTestNode,
  createTestStore,
  eventually,
  signUp,
  TEST_STORE_KIND,
  type TestApp,
  type TestBuyer,
  type TestNode,
  type TestStore,
} from '../../../test/harness.js';
import { createNodeDirectory, NODE_DIRECTORY_REFRESH_MS, type DirectoryCandidate } from './directory.js';

const chat = (extra: Record<string, unknown> = {}) => ({
  model: 'tinyllama',
  messages: [{ role: 'user', content: 'hello' }],
  ...extra,
});

const byId = (candidates: DirectoryCandidate[], id: string) => candidates.find((c) => c.id === id);

/** Leases a job's work to `nodeId` straight in the store, as another instance's scheduler would. */
async function leaseJobWork(t: TestApp, orgId: string, nodeId: string, id: string) {
  await t.ctx.db.query(
    `INSERT INTO work_items (id, job_id, org_id, node_id, type, kind, payload, status, lease_expires_at)
     VALUES ($1, $1, $2, $3, 'job', 1, '{}', 'leased', now() + interval '1 hour')`,
    [id, orgId, nodeId],
  );
}

const onPostgres = TEST_STORE_KIND === 'postgres';

describe('node directory: routing without a statement, on one instance', () => {
  let t: TestApp;
  let alice: TestBuyer;
  let operator: TestBuyer;
  let operatorKey: string;
  beforeAll(async () => {
    t = await createTestApp();
    alice = await signUp(t.app);
    operator = await signUp(t.app);
    operatorKey = await createKey(t.app, operator, ['operator']);
  });
  afterAll(() => t.close());

  /** Sends a request and lets `node` serve it: the request's answer, or undefined when `node` never got it. */
  async function servedBy(node: TestNode, payload: Record<string, unknown>) {
    const pending = t.app.inject({
      method: 'POST',
      url: '/v1/chat/completions',
      headers: bearer(alice.apiKey),
      payload,
    });
    const [work] = await node.poll({ waitMs: 5_000 });
    if (!work) throw new Error('no work reached the node');
    expect((await node.complete(work, JSON.stringify({ content: 'hi', finish_reason: 'stop' }), 3)).statusCode).toBe(
      200,
    );
    const res = await pending;
    expect(res.statusCode).toBe(200);
    return res;
  }

  /**
   * After a statement on another connection: on PGlite the store's announcement is heard before
   * the statement returns; on PostgreSQL it comes over the listening connection, so wait for it.
   */
  const heard = () => (onPostgres ? t.ctx.nodeDirectory.caughtUp() : Promise.resolve());

  const ask = (payload: Record<string, unknown>) =>
    t.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(alice.apiKey), payload });

  it('a node registered is routed to at once, with no statement to decide; its heartbeat with new models too', async () => {
    const node = await createTestNode(t.app, operatorKey, {
      country: 'DE',
      region: 'eu-central',
      models: ['tinyllama'],
    });
    await t.ctx.nodeDirectory.caughtUp();
    const query = vi.spyOn(t.ctx.db, 'query');
    const serving = await t.ctx.nodeDirectory.serving('tinyllama');
    expect(query).not.toHaveBeenCalled();
    query.mockRestore();
    expect(byId(serving, node.nodeId)).toEqual({
      id: node.nodeId,
      org_id: operator.orgId,
      country: 'DE',
      region: 'eu-central',
      gpu_model: null,
      chat_fields: [],
      attestation_verified: false,
      open_work: 0,
    });
    // The gateway decides over the directory.
    const routed = vi.spyOn(t.ctx.nodeDirectory, 'serving');
    const res = await servedBy(node, chat({ strict_jurisdiction: 'DE' }));
    expect(res.headers['x-svc-node']).toBe(node.nodeId);
    expect(routed).toHaveBeenCalledWith('tinyllama');
    routed.mockRestore();

    expect(byId(await t.ctx.nodeDirectory.serving('phi-4'), node.nodeId)).toBeUndefined();
    const beat = await node.call('POST', '/api/v1/node/heartbeat', {
      load: 0,
      active_work: [],
      models: ['tinyllama', 'phi-4'],
    });
    expect(beat.statusCode).toBe(200);
    expect(byId(await t.ctx.nodeDirectory.serving('phi-4'), node.nodeId)?.country).toBe('DE');
    const phi = await servedBy(node, chat({ model: 'phi-4', strict_jurisdiction: 'DE' }));
    expect(phi.headers['x-svc-node']).toBe(node.nodeId);
  });

  it('a node deleted, marked down or whose attestation changes by a statement is seen at once (the store announces it)', async () => {
    const node = await createTestNode(t.app, operatorKey, { country: 'JP', region: 'ap-northeast' });
    expect(byId(await t.ctx.nodeDirectory.serving('tinyllama'), node.nodeId)?.attestation_verified).toBe(false);
    await t.ctx.db.query(
      "UPDATE nodes SET attestation_verified = true, attestation_expires_at = now() + interval '1 hour' WHERE id = $1",
      [node.nodeId],
    );
    await heard();
    expect(byId(await t.ctx.nodeDirectory.serving('tinyllama'), node.nodeId)?.attestation_verified).toBe(true);
    // A verification lapses by the clock, without a write.
    const later = Date.now() + 2 * 3_600_000;
    expect(byId(await t.ctx.nodeDirectory.serving('tinyllama', later), node.nodeId)).toBeUndefined();

    await t.ctx.db.query("UPDATE nodes SET last_seen = now() - interval '1 hour' WHERE id = $1", [node.nodeId]);
    await heard();
    expect(byId(await t.ctx.nodeDirectory.serving('tinyllama'), node.nodeId)).toBeUndefined();
    const down = await ask(chat({ strict_jurisdiction: 'JP' }));
    expect(down.statusCode).toBe(503);
    expect(down.json().error.message).toBe('no live node serves tinyllama in JP');
    // Its next signed call makes it live again, here at once.
    await node.heartbeat([]);
    expect(byId(await t.ctx.nodeDirectory.serving('tinyllama'), node.nodeId)?.country).toBe('JP');

    await t.ctx.db.query('DELETE FROM nodes WHERE id = $1', [node.nodeId]);
    await heard();
    expect(byId(await t.ctx.nodeDirectory.serving('tinyllama'), node.nodeId)).toBeUndefined();
    expect((await ask(chat({ strict_jurisdiction: 'JP' }))).statusCode).toBe(503);
  });

  it('a node that made no signed call for NODE_LIVE_SECONDS is not routed to', async () => {
    const node = await createTestNode(t.app, operatorKey, { country: 'BR', region: 'sa-east' });
    const now = Date.now();
    expect(byId(await t.ctx.nodeDirectory.serving('tinyllama', now + 29_000), node.nodeId)?.country).toBe('BR');
    expect(byId(await t.ctx.nodeDirectory.serving('tinyllama', now + 31_000), node.nodeId)).toBeUndefined();
  });

  it("counts each of this instance's attempts once, whether or not a refresh of the store already sees its work", async () => {
    const node = await createTestNode(t.app, operatorKey, { country: 'DE', region: 'eu-central' });
    // One attempt of this instance on the node, open from before the directory's first read. Its
    // work row is written behind the dispatch: not in the store at the first read, in it at the next.
    const local = new Map([[node.nodeId, 1]]);
    let inStore = false;
    const directory = await createNodeDirectory(
      { db: t.ctx.db, bus: t.ctx.bus, log: t.ctx.log },
      {
        refreshMs: 3_600_000,
        localOpen: () => local,
        localWork: () => (local.size > 0 ? ['wrk_directory_attempt'] : []),
        openWork: async (except) =>
          new Map(inStore && !except.includes('wrk_directory_attempt') ? [[node.nodeId, 1]] : []),
      },
    );
    try {
      const open = async () => byId(await directory.serving('tinyllama'), node.nodeId)?.open_work;
      expect(await open()).toBe(1);
      inStore = true;
      await directory.refresh();
      expect(await open()).toBe(1);
      // The attempt ends once its completion is written: the store no longer counts the work open.
      local.clear();
      inStore = false;
      expect(await open()).toBe(0);
      await directory.refresh();
      expect(await open()).toBe(0);
    } finally {
      await directory.close();
    }
  });

  it('open work steers routing to the less loaded node: this instance counts its own at once, the store the rest', async () => {
    const a = await createTestNode(t.app, operatorKey, { country: 'FR', region: 'eu-west' });
    const b = await createTestNode(t.app, operatorKey, { country: 'FR', region: 'eu-west' });
    const open = async () => {
      const serving = await t.ctx.nodeDirectory.serving('tinyllama');
      return [byId(serving, a.nodeId)?.open_work, byId(serving, b.nodeId)?.open_work];
    };
    expect(await open()).toEqual([0, 0]);
    // One request in flight on either node: the next goes to the other one.
    const first = ask(chat({ strict_jurisdiction: 'FR' }));
    await eventually(() => t.ctx.hub.attempts.size === 1);
    // Counted as it was routed, before any refresh of the store could see it.
    const [onA, onB] = await open();
    expect([onA, onB].sort()).toEqual([0, 1]);
    const firstNode = onA === 1 ? a : b;
    const other = firstNode === a ? b : a;
    const second = await servedBy(other, chat({ strict_jurisdiction: 'FR' }));
    expect(second.headers['x-svc-node']).toBe(other.nodeId);
    const [work] = await firstNode.poll({ waitMs: 5_000 });
    if (!work) throw new Error('no work reached the first node');
    await firstNode.complete(work, JSON.stringify({ content: 'hi', finish_reason: 'stop' }), 3);
    expect((await first).statusCode).toBe(200);
    // Ended in memory once its records are written.
    await eventually(async () => (await open()).every((n) => n === 0));

    // Work leased elsewhere (a job, another instance) counts from the next refresh of the store.
    await leaseJobWork(t, operator.orgId, a.nodeId, 'wrk_directory_job_1');
    await leaseJobWork(t, operator.orgId, a.nodeId, 'wrk_directory_job_2');
    await t.ctx.nodeDirectory.refresh();
    expect(await open()).toEqual([2, 0]);
    for (let i = 0; i < 3; i++) {
      const res = await servedBy(b, chat({ strict_jurisdiction: 'FR' }));
      expect(res.headers['x-svc-node']).toBe(b.nodeId);
    }
    await t.ctx.db.query("UPDATE work_items SET status = 'completed' WHERE id LIKE 'wrk_directory_job_%'");
    await t.ctx.nodeDirectory.refresh();
    expect(await open()).toEqual([0, 0]);
  });
});

if (!onPostgres)
  console.log('[svc test] SKIPPED node directory on two instances: needs PostgreSQL (runs in the DATABASE_URL pass)');

describe.runIf(onPostgres)('node directory: two instances on one PostgreSQL', () => {
  let store: TestStore;
  let one: TestApp;
  let two: TestApp;
  let operator: TestBuyer;
  let operatorKey: string;
  beforeAll(async () => {
    store = await createTestStore();
    one = await createTestApp({ store });
    two = await createTestApp({ store });
    operator = await signUp(one.app);
    operatorKey = await createKey(one.app, operator, ['operator']);
  });
  afterAll(async () => {
    await one.close();
    await two.close();
    await store.drop();
  });

  /** Milliseconds until `predicate` holds on instance two (checked every millisecond). */
  async function lag(since: number, predicate: (serving: DirectoryCandidate[]) => boolean): Promise<number> {
    for (;;) {
      if (predicate(await two.ctx.nodeDirectory.serving('tinyllama'))) return Date.now() - since;
      if (Date.now() - since > 5_000) throw new Error('instance two never saw the change');
      await new Promise((r) => setTimeout(r, 1));
    }
  }

  it('a node registered, changed or deleted through instance one reaches instance two over the bus, in milliseconds', async () => {
    const lags: Record<string, number> = {};
    let since = Date.now();
    const node = await createTestNode(one.app, operatorKey, { country: 'NO', region: 'eu-north' });
    lags.registered = await lag(since, (s) => byId(s, node.nodeId)?.country === 'NO');

    since = Date.now();
    await node.call('POST', '/api/v1/node/heartbeat', { load: 0, active_work: [], models: ['phi-4'] });
    lags.models = await lag(since, (s) => byId(s, node.nodeId) === undefined);
    expect(byId(await two.ctx.nodeDirectory.serving('phi-4'), node.nodeId)?.country).toBe('NO');

    since = Date.now();
    await one.ctx.db.query(
      "UPDATE nodes SET models = '{tinyllama}', attestation_verified = true, attestation_expires_at = now() + interval '1 hour' WHERE id = $1",
      [node.nodeId],
    );
    lags.attested = await lag(since, (s) => byId(s, node.nodeId)?.attestation_verified === true);

    since = Date.now();
    await one.ctx.db.query('DELETE FROM nodes WHERE id = $1', [node.nodeId]);
    lags.deleted = await lag(since, (s) => byId(s, node.nodeId) === undefined);

    console.log(`[node directory] lag to the second instance, ms: ${JSON.stringify(lags)}`);
    for (const ms of Object.values(lags)) expect(ms).toBeLessThan(NODE_DIRECTORY_REFRESH_MS);
  });

  it("another instance's calls and open work reach instance two by its refresh", async () => {
    const node = await createTestNode(one.app, operatorKey, { country: 'FI', region: 'eu-north' });
    await lag(Date.now(), (s) => byId(s, node.nodeId) !== undefined);
    await leaseJobWork(one, operator.orgId, node.nodeId, 'wrk_directory_two_1');
    const since = Date.now();
    const ms = await lag(since, (s) => byId(s, node.nodeId)?.open_work === 1);
    console.log(`[node directory] open work leased elsewhere seen by the second instance after ${ms} ms`);
    expect(ms).toBeLessThan(2 * NODE_DIRECTORY_REFRESH_MS);

    // Marked down (announced), then a signed call to instance one only (not announced).
    await one.ctx.db.query("UPDATE nodes SET last_seen = now() - interval '1 hour' WHERE id = $1", [node.nodeId]);
    await lag(Date.now(), (s) => byId(s, node.nodeId) === undefined);
    const called = Date.now();
    await node.heartbeat([]);
    const live = await lag(called, (s) => byId(s, node.nodeId) !== undefined);
    console.log(`[node directory] a call to the first instance made the node live on the second after ${live} ms`);
    expect(live).toBeLessThan(2 * NODE_DIRECTORY_REFRESH_MS);
  });
});

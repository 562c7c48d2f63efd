import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createKey, signUp, startTestServer, type TestBuyer } from '@svc/server/testing';
import { outboxWorkIds } from '../src/index.js';
import { createFakeEngine, type FakeEngine } from './fake-engine.js';
import { cleanupAgents, eventually, makeAgent } from './helpers.js';

type Server = Awaited<ReturnType<typeof startTestServer>>;

describe('the agent on standing slots (the channel, against the real server)', () => {
  let server: Server;
  let buyer: TestBuyer;
  let operatorKey: string;
  let polls = 0;
  // Holds every write of the server's group-commit writer: receipts are not acknowledged meanwhile.
  let gate: { open: () => void; wait: Promise<void> } | undefined;

  beforeAll(async () => {
    server = await startTestServer();
    buyer = await signUp(server.app);
    operatorKey = await createKey(server.app, buyer, ['operator']);
    const { jobSignal, writer } = server.ctx;
    const wait = jobSignal.wait.bind(jobSignal);
    jobSignal.wait = (...args) => {
      polls++;
      return wait(...args);
    };
    const enqueue = writer.enqueue.bind(writer);
    writer.enqueue = (write) => (gate ? gate.wait.then(() => enqueue(write)) : enqueue(write));
    // Openings and receipts go in as batched kinds.
    const enqueueAs = writer.enqueueAs.bind(writer);
    writer.enqueueAs = (kind, item) => (gate ? gate.wait.then(() => enqueueAs(kind, item)) : enqueueAs(kind, item));
  });
  afterEach(async () => {
    gate?.open();
    gate = undefined;
    await cleanupAgents();
  });
  afterAll(async () => {
    await server.stop();
  });

  const closeGate = () => {
    let open = () => {};
    const wait = new Promise<void>((resolve) => (open = resolve));
    gate = { open, wait };
    return gate;
  };

  const chat = (model: string, content: string) =>
    fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { ...bearer(buyer.apiKey), 'content-type': 'application/json' },
      body: JSON.stringify({ model, messages: [{ role: 'user', content }] }),
    });

  // Receipts kept in the outbox (gateway work: lines of its journal), as a restart would read them.
  const outboxFiles = (dataDir: string) => Promise.resolve(outboxWorkIds(dataDir).length);

  async function agentFor(model: string, engine: FakeEngine, options: { concurrency: number; maxUnacked?: number }) {
    const node = await makeAgent(
      { url: server.url, apiKey: operatorKey },
      { engines: new Map([[model, engine]]), ...options },
    );
    await node.agent.start();
    return node;
  }

  it('serves more requests than its slots while no receipt is acknowledged (a slot frees once the receipt is sealed), never running more than its concurrency, with no pull', async () => {
    const engine = createFakeEngine({ models: ['tinyllama'], delayMs: 30 });
    const node = await agentFor('tinyllama', engine, { concurrency: 2 });
    polls = 0;
    const held = closeGate();
    const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => chat('tinyllama', `standing ${i}`)));
    expect(answers.map((r) => r.status)).toEqual([200, 200, 200, 200, 200, 200]);
    // Six answered, none acknowledged: each receipt waits in the outbox, its slot already free.
    expect(await outboxFiles(node.dataDir)).toBe(6);
    expect(engine.calls).toHaveLength(6);
    expect(engine.maxInFlight).toBe(2);
    // Pushed on granted slots: no long-poll or channel pull waited in the server.
    expect(polls).toBe(0);
    held.open();
    await eventually(() => node.workEvents().filter((e) => e.outcome === 'completed').length === 6, 'six acks');
    expect(await outboxFiles(node.dataDir)).toBe(0);
  }, 60_000);

  it('stops granting while maxUnacked receipts wait for their ack, and grants again once they are acknowledged', async () => {
    const engine = createFakeEngine({ models: ['phi-4'] });
    const node = await agentFor('phi-4', engine, { concurrency: 2, maxUnacked: 2 });
    const held = closeGate();
    const first = await Promise.all([chat('phi-4', 'one'), chat('phi-4', 'two')]);
    expect(first.map((r) => r.status)).toEqual([200, 200]);
    expect(await outboxFiles(node.dataDir)).toBe(2);
    // Two receipts unacknowledged: the node asks for no more work; these wait in the server.
    const later = [chat('phi-4', 'three'), chat('phi-4', 'four')];
    // No slot granted: each is stored for the node's next grant instead of being pushed.
    const waiting = async () => {
      const { rows } = await server.ctx.db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM work_items WHERE node_id = $1 AND status = 'leased' AND dispatched_at IS NULL`,
        [node.agent.nodeId],
      );
      return rows[0]?.n ?? 0;
    };
    let stored = 0;
    const deadline = Date.now() + 10_000;
    while ((stored = await waiting()) < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(stored).toBe(2);
    expect([...engine.calls].sort()).toEqual(['chat:one', 'chat:two']);
    held.open();
    expect((await Promise.all(later)).map((r) => r.status)).toEqual([200, 200]);
    expect(engine.calls).toHaveLength(4);
  }, 60_000);
});

import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { outboxWorkIds } from '@svc/node-agent';
import { startOpenAITestServer, type OpenAITestServer } from '@svc/node-agent/testing';
import { bearer, createKey, signUp, startTestServer, type TestBuyer } from '@svc/server/testing';
import { spawnSvc, until, type SpawnedSvc } from './spawn.js';

type Server = Awaited<ReturnType<typeof startTestServer>>;

/**
 * `kill -9` of a real `svc node` that holds a signed receipt the server has not acknowledged:
 * the receipt is in the node's outbox, the server commits it once, and the restarted node sends
 * it again over the channel and is acknowledged (a duplicate, not an error), so its outbox
 * empties with nothing rejected and exactly one receipt and one charge exist.
 */
describe('a node killed with an unacknowledged receipt (svc node process, channel)', () => {
  let server: Server;
  let upstream: OpenAITestServer;
  let buyer: TestBuyer;
  let operatorKey: string;
  let dir: string;
  const nodes: SpawnedSvc[] = [];
  const startNode = async () => {
    const proc = spawnSvc(
      [
        'node',
        '--server',
        server.url,
        '--data-dir',
        dir,
        '--country',
        'CA',
        '--upstream',
        upstream.url,
        '--model',
        'tinyllama',
      ],
      { SVC_NODE_API_KEY: operatorKey },
    );
    nodes.push(proc);
    await until('node registration', async () => /registered (node_[a-z0-9]+)/.exec(proc.stdout())?.[1], 90_000);
    return proc;
  };

  beforeAll(async () => {
    server = await startTestServer();
    upstream = await startOpenAITestServer();
    buyer = await signUp(server.app);
    operatorKey = await createKey(server.app, buyer, ['operator']);
    dir = mkdtempSync(join(tmpdir(), 'svc-channel-kill-'));
  }, 120_000);
  afterAll(async () => {
    for (const n of nodes) n.child.kill('SIGKILL');
    await upstream.close();
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('applies the receipt exactly once', async () => {
    const first = await startNode();
    // Slow enough upstream that the test holds the work's row before the node signs its result.
    upstream.setDelay(1_500);
    const answer = fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { ...bearer(buyer.apiKey), 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'tinyllama', messages: [{ role: 'user', content: 'keep my receipt' }] }),
    });
    const db = server.ctx.db;
    const work = await until(
      'the work dispatched to the node',
      async () => {
        const { rows } = await db.query<{ id: string; job_id: string }>(
          "SELECT id, job_id FROM work_items WHERE type = 'chat' AND status = 'leased' AND dispatched_at IS NOT NULL",
        );
        return rows[0];
      },
      30_000,
    );
    // The node's receipt message, seen as it reaches the server (the server's own listener runs first).
    let receiptArrived = false;
    for (const socket of server.app.websocketServer.clients)
      socket.on('message', (data: Buffer) => {
        const text = data.toString('utf8');
        if (text.includes('"receipt"') && text.includes(work.id)) receiptArrived = true;
      });
    // The receipt's transaction waits for this one: the node's receipt stays unacknowledged.
    let release: () => void = () => undefined;
    const released = new Promise<void>((resolve) => (release = resolve));
    const blocking = db.transaction(async (tx) => {
      await tx.query('SELECT id FROM work_items WHERE id = $1 FOR UPDATE', [work.id]);
      await released;
    });
    // Kept in the node's outbox (gateway work: a line of its journal), as a restart would read it.
    const held = () => outboxWorkIds(dir).includes(work.id);
    await until('the signed receipt in the node outbox', async () => (held() ? true : undefined), 30_000);
    // The node sends it right after writing it: kill the node once the server has it.
    await until('the receipt message at the server', async () => (receiptArrived ? true : undefined), 30_000);
    first.child.kill('SIGKILL');
    await first.exited;
    const restartedAt = Date.now();
    release();
    await blocking;
    const res = await answer;
    expect(res.status).toBe(200);
    expect(held()).toBe(true);

    upstream.setDelay(0);
    const second = await startNode();
    await until('the outbox emptied after the re-send', async () => (held() ? undefined : true), 60_000);
    expect(existsSync(join(dir, 'outbox', 'rejected')) ? readdirSync(join(dir, 'outbox', 'rejected')) : []).toEqual([]);
    expect(second.stdout() + second.stderr()).not.toMatch(/refused/);

    const receipts = await db.query<{ id: string; created_at: Date }>(
      'SELECT id, created_at FROM receipts WHERE job_id = $1',
      [work.job_id],
    );
    expect(receipts.rows).toHaveLength(1);
    // Committed by the first send (before the restart): the second was a duplicate, acknowledged.
    expect(receipts.rows[0]?.created_at.getTime()).toBeLessThan(restartedAt + 1_000);
    const request = await db.query<{ status: string; charged_cents: string | null }>(
      'SELECT status, charged_cents FROM gateway_requests WHERE id = $1',
      [work.job_id],
    );
    expect(request.rows[0]?.status).toBe('completed');
    const charges = await db.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM credit_transactions WHERE ref = $1 AND tx_type = 'charge'",
      [work.job_id],
    );
    // Every charge has its own row, a sub-cent one included (docs/billing.md): exactly one.
    expect(charges.rows[0]?.n).toBe(1);
  }, 240_000);
});

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startOpenAITestServer, type OpenAITestServer } from '@svc/node-agent/testing';
import { createLedger, loadConfig, openDb, type Db } from '@svc/server';
import { createTestStore, TEST_STORE_KIND, type TestStore } from '@svc/server/testing';
import { spawnNode, spawnSvc, until, waitForUrl, type SpawnedSvc } from './spawn.js';

const onPostgres = TEST_STORE_KIND === 'postgres';
if (!onPostgres)
  console.log(
    '[svc test] SKIPPED credit reservations across server processes: needs PostgreSQL (runs in the DATABASE_URL pass)',
  );

const N = 200;
const CREDIT_FOR = 50;
const CHAT = { model: 'tinyllama', messages: [{ role: 'user', content: 'reserve me' }], max_tokens: 64 };

/**
 * Two real `svc serve` processes on one PostgreSQL, each deciding 402s from its own in-memory
 * credit reservation (DESIGN.md sections 4 and 7): 200 concurrent requests of one organization
 * with credit for 50 holds, all in flight at once (the upstream keeps the admitted ones busy
 * until every request was decided). At most 50 are admitted, none is answered anything but 200 or
 * 402, the balance never goes below zero, and each instance returns its reservation on shutdown.
 */
describe.skipIf(!onPostgres)('credit reservations across two svc serve processes sharing PostgreSQL', () => {
  let store: TestStore;
  let db: Db;
  let upstream: OpenAITestServer;
  let dir: string;
  const procs: SpawnedSvc[] = [];
  const urls: string[] = [];

  const serve = async () => {
    const p = spawnSvc(['serve'], {
      SVC_PORT: '0',
      SVC_DATA_DIR: store.dataDir,
      DATABASE_URL: store.databaseUrl ?? '',
      SVC_FREE_TIER_CENTS: '0',
      SVC_SIGNUP_RATE_LIMIT_BURST: '1000',
      SVC_ALLOW_PRIVATE_EGRESS: '1',
      SVC_RATE_LIMIT_BURST: '10000',
      SVC_RATE_LIMIT_RPS: '10000',
      // Renewed every 200 s, so never within the test: an idle reservation is returned at a
      // renewal, and under a loaded CI the wait for the charges could outlast two of the default
      // 10 s ones. What gives the reservations back here is the shutdown alone.
      SVC_RESERVATION_TTL_MS: '600000',
    });
    procs.push(p);
    return waitForUrl(p, 90_000);
  };

  beforeAll(async () => {
    store = await createTestStore();
    urls.push(await serve());
    urls.push(await serve());
    db = await openDb(loadConfig({ 'data-dir': store.dataDir }, { DATABASE_URL: store.databaseUrl ?? '' }));
    upstream = await startOpenAITestServer();
    dir = mkdtempSync(join(tmpdir(), 'svc-reservations-'));
  }, 180_000);
  afterAll(async () => {
    for (const p of procs) p.child.kill('SIGKILL');
    await upstream?.close();
    await db?.close();
    await store?.drop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it(`${N} concurrent requests on credit for ${CREDIT_FOR}: at most ${CREDIT_FOR} answered, never below zero, reservations returned on shutdown`, async () => {
    const [a, b] = urls as [string, string];
    const signup = await fetch(`${a}/api/v1/auth/signup`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'reserve@example.test', password: 'two instances one balance' }),
    });
    const { api_key: apiKey, token } = (await signup.json()) as { api_key: string; token: string };
    const auth = (credential: string) => ({
      authorization: `Bearer ${credential}`,
      'content-type': 'application/json',
    });
    const operator = (await (
      await fetch(`${a}/api/v1/auth/api-keys`, {
        method: 'POST',
        headers: auth(token),
        body: JSON.stringify({ label: 'node', scopes: ['operator'] }),
      })
    ).json()) as { api_key: string };
    const node = spawnNode(a, dir, upstream.url, operator.api_key);
    procs.push(node);
    await until('node registration', async () => /registered (node_[a-z0-9]+)/.exec(node.stdout())?.[1], 90_000);
    const chat = (url: string) =>
      fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: auth(apiKey), body: JSON.stringify(CHAT) });

    // The 402 of an empty balance names what one request holds.
    const probe = (await (await chat(b)).json()) as { error: { code: string; message: string } };
    expect(probe.error.code).toBe('insufficient_credits');
    const holdCents = Number(/(\d+) cents needed/.exec(probe.error.message)?.[1]);
    expect(holdCents).toBeGreaterThan(0);
    const { rows: orgs } = await db.query<{ org_id: string }>(
      "SELECT m.org_id FROM memberships m JOIN buyers u ON u.id = m.buyer_id WHERE u.email = 'reserve@example.test'",
    );
    const orgId = orgs[0]?.org_id ?? '';
    await createLedger(db).credit(orgId, CREDIT_FOR * holdCents, { txType: 'topup', description: 'test credit' });

    // Admitted requests stay in flight until every request was decided.
    upstream.setDelay(8_000);
    const started = Date.now();
    let refused = 0;
    const answers = Array.from({ length: N }, (_, i) =>
      chat(i % 2 === 0 ? a : b).then((r) => {
        if (r.status === 402) refused++;
        return r.status;
      }),
    );
    const decided = await until(
      'every request admitted or refused',
      async () => {
        const { rows } = await db.query<{ n: number; completed: number }>(
          "SELECT count(*)::int AS n, count(*) FILTER (WHERE status <> 'running')::int AS completed FROM gateway_requests WHERE org_id = $1",
          [orgId],
        );
        const admitted = rows[0]?.n ?? 0;
        return admitted + refused === N ? rows[0] : undefined;
      },
      60_000,
    );
    upstream.setDelay(0);
    const statuses = await Promise.all(answers);
    const ok = statuses.filter((s) => s === 200).length;
    console.log(
      `[svc test] ${N} requests on credit for ${CREDIT_FOR} over two instances: ${ok} answered 200, ${statuses.filter((s) => s === 402).length} refused 402, decided in ${Date.now() - started} ms`,
    );
    // All were decided while no admitted request had ended: nothing was released meanwhile.
    expect(decided.completed).toBe(0);
    expect(ok).toBeLessThanOrEqual(CREDIT_FOR);
    expect(ok).toBeGreaterThan(0);
    expect(statuses.filter((s) => s !== 200 && s !== 402)).toEqual([]);

    // The charges are written behind the answers (each instance's group-commit writer): read the
    // ledger once every answered request is closed in the store.
    await until(
      'every answered request closed in the store',
      async () => {
        const { rows } = await db.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM gateway_requests WHERE org_id = $1 AND status = 'running'",
          [orgId],
        );
        return rows[0]?.n === 0 ? true : undefined;
      },
      30_000,
    );
    const { rows: account } = await db.query<{
      balance_cents: number;
      held_cents: number;
      charges: number;
      sum: number;
    }>(
      `SELECT a.balance_cents, a.held_cents,
              (SELECT count(*)::int FROM credit_transactions t WHERE t.org_id = a.org_id AND t.tx_type = 'charge') AS charges,
              (SELECT COALESCE(sum(amount_cents), 0)::bigint FROM credit_transactions t WHERE t.org_id = a.org_id) AS sum
         FROM credit_accounts a WHERE a.org_id = $1`,
      [orgId],
    );
    expect(account[0]?.charges).toBe(ok);
    expect(account[0]?.held_cents).toBe(0);
    expect(Number(account[0]?.balance_cents)).toBeGreaterThanOrEqual(0);
    expect(Number(account[0]?.sum)).toBe(Number(account[0]?.balance_cents));
    const { rows: min } = await db.query<{ low: number }>(
      'SELECT min(balance_after)::bigint AS low FROM credit_transactions WHERE org_id = $1',
      [orgId],
    );
    expect(Number(min[0]?.low)).toBeGreaterThanOrEqual(0);

    // Both instances reserved; a graceful shutdown returns each one's reservation.
    const reservations = async () =>
      (
        await db.query<{ rows: number; reserved: number }>(
          'SELECT (SELECT count(*)::int FROM credit_reservations WHERE org_id = $1) AS rows, (SELECT reserved_cents FROM credit_accounts WHERE org_id = $1) AS reserved',
          [orgId],
        )
      ).rows[0];
    expect((await reservations())?.rows).toBeGreaterThan(0);
    node.child.kill('SIGKILL');
    for (const p of procs.slice(0, 2)) {
      p.child.kill('SIGTERM');
      await p.exited;
    }
    expect(await reservations()).toEqual({ rows: 0, reserved: 0 });
  }, 300_000);
});

import { createServer } from 'node:net';
import { expect } from 'vitest';
import { openDb, type Db } from '@svc/server';
import type { TestStore } from '@svc/server/testing';
import { spawnSvc, waitForUrl, type SpawnedSvc } from './spawn.js';

/**
 * Helpers of the crash tests (kill -9 of `svc serve` or `svc node`, then a restart on the same
 * store): a port to restart on, a buyer with an operator key, the store opened once no process
 * holds it, and the "charged once" audit every crash test ends with.
 */

/** A loopback port free right now, so that the restarted server listens where the node connects. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (typeof address !== 'object' || !address) throw new Error('no port');
  return address.port;
}

/**
 * `svc serve` on `store` and `port` with the crash tests' settings (a free tier and rate limits no
 * loop reaches, warnings only) and `env`, added to `procs` (to kill at the end); its URL once it
 * listens.
 *
 * @example
 * const { proc, url } = await serveOn(store, port, procs, { SVC_LEASE_SECONDS: '6' });
 */
export async function serveOn(
  store: TestStore,
  port: number,
  procs: SpawnedSvc[],
  env: Record<string, string> = {},
): Promise<{ proc: SpawnedSvc; url: string }> {
  const proc = spawnSvc(['serve'], {
    ...env,
    SVC_DATA_DIR: store.dataDir,
    SVC_PORT: String(port),
    SVC_LOG_LEVEL: 'warn',
    SVC_FREE_TIER_CENTS: '100000',
    SVC_RATE_LIMIT_RPS: '10000',
    SVC_RATE_LIMIT_BURST: '10000',
    ...(store.databaseUrl ? { DATABASE_URL: store.databaseUrl } : {}),
  });
  procs.push(proc);
  return { proc, url: await waitForUrl(proc, 90_000) };
}

/**
 * A JSON POST to `base`, a signed-up buyer's API key and an operator key of the same organization.
 *
 * @example
 * const { post, apiKey, nodeKey } = await buyerWithOperatorKey(url, 'kill@example.test', 'a long password');
 */
export async function buyerWithOperatorKey(base: string, email: string, password: string) {
  const post = async (path: string, body: unknown, credential?: string) =>
    fetch(`${base}${path}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(credential ? { authorization: `Bearer ${credential}` } : {}),
      },
      body: JSON.stringify(body),
    });
  const { api_key: apiKey, token } = (await (await post('/api/v1/auth/signup', { email, password })).json()) as {
    api_key: string;
    token: string;
  };
  const { api_key: nodeKey } = (await (
    await post('/api/v1/auth/api-keys', { label: 'node', scopes: ['operator'] }, token)
  ).json()) as { api_key: string };
  return { post, apiKey, nodeKey };
}

/**
 * Opens the store once no process holds it (PGlite is one process's), runs `fn`, closes it.
 *
 * @example
 * const n = await withStore(store, async (db) => (await db.query('SELECT 1')).rows.length);
 */
export async function withStore<T>(store: TestStore, fn: (db: Db) => Promise<T>): Promise<T> {
  const db: Db = await openDb(store);
  try {
    return await fn(db);
  } finally {
    await db.close();
  }
}

/**
 * One receipt per job id, one charge per answered request, and every balance the sum of its ledger.
 *
 * @example
 * await withStore(store, (db) => expectChargedOnce(db, answeredIds));
 */
export async function expectChargedOnce(db: Db, answered: string[]): Promise<void> {
  const dupReceipts = await db.query('SELECT job_id FROM receipts GROUP BY job_id HAVING count(*) > 1');
  expect(dupReceipts.rows).toEqual([]);
  const charges = await db.query<{ ref: string; n: number }>(
    "SELECT ref, count(*)::int AS n FROM credit_transactions WHERE tx_type = 'charge' AND ref = ANY($1::text[]) GROUP BY ref",
    [answered],
  );
  expect(charges.rows.map((r) => r.n)).toEqual(answered.map(() => 1));
  const unbalanced = await db.query(
    `SELECT a.org_id FROM credit_accounts a
      WHERE a.balance_cents <> (SELECT COALESCE(sum(t.amount_cents), 0) FROM credit_transactions t WHERE t.org_id = a.org_id)`,
  );
  expect(unbalanced.rows).toEqual([]);
}

import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canonicalJson, logRecordHash, storedHashIndex } from '@svc/protocol';
import { loadConfig, openDb } from '@svc/server';
import { createTestStore, type TestStore } from '@svc/server/testing';
import { log } from '../src/log-watch.js';
import { spawnSvc, until, waitForUrl, type SpawnedSvc } from './spawn.js';

// npm test: one store: the subject is the monitor, `svc log watch`; the log's leaves, tiles and checkpoints run on both
// stores in packages/server/src/modules/log/log.test.ts and multi-instance.test.ts.

/**
 * `svc log watch` against a real `svc serve`: runs close (jobs submitted and cancelled), the
 * sequencer signs checkpoints, the monitor keeps them; then a leaf of the log is rewritten in the
 * store behind the server's back, as an operator with database access could, and the monitor
 * names it.
 */
describe('svc log watch against svc serve', () => {
  let store: TestStore;
  let server: SpawnedSvc | undefined;
  let base = '';
  let key = '';
  const state = mkdtempSync(join(tmpdir(), 'svc-log-watch-e2e-'));
  const env = () => ({
    SVC_DATA_DIR: store.dataDir,
    SVC_PORT: '0',
    SVC_LOG_LEVEL: 'warn',
    SVC_LOG_CHECKPOINT_MS: '200',
    ...(store.databaseUrl ? { DATABASE_URL: store.databaseUrl } : {}),
  });
  const start = async () => {
    server = spawnSvc(['serve'], env());
    base = await waitForUrl(server);
  };
  const stop = async () => {
    server?.child.kill('SIGTERM');
    if (server) await server.exited;
    server = undefined;
  };
  const post = async (path: string, body: unknown) =>
    (await (
      await fetch(`${base}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      })
    ).json()) as Record<string, unknown>;
  /** Closes `count` evidence runs (jobs submitted and cancelled) and waits until a checkpoint holds them. */
  const closeRuns = async (count: number) => {
    for (let i = 0; i < count; i++) {
      const job = await post('/api/v1/marketplace/jobs', {
        kind: 1,
        budget: 1,
        max_price_per_unit: 0.01,
        currency: 'CAD',
        model: 'tinyllama',
        inline_text: `log run ${i}`,
      });
      await post(`/api/v1/marketplace/jobs/${String(job.job_id)}/cancel`, {});
    }
  };
  const checkpointSize = async () => {
    const res = await fetch(`${base}/api/v1/log/checkpoint`);
    return res.ok ? Number((await res.text()).split('\n')[1]) : 0;
  };
  const waitForSize = (size: number) =>
    until(`a checkpoint of ${size} records`, async () => ((await checkpointSize()) >= size ? true : undefined));
  const watch = async () => {
    let out = '';
    let err = '';
    const code = await log(['watch', '--state', state, '--once', base], {
      out: (t) => (out += t),
      err: (t) => (err += t),
    });
    return { code, out, err };
  };
  const keptSize = () =>
    (JSON.parse(readFileSync(join(state, 'state.json'), 'utf8')) as { tree_size: number }).tree_size;

  beforeAll(async () => {
    store = await createTestStore();
    await start();
    const signup = (await (
      await fetch(`${base}/api/v1/auth/signup`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: 'monitor@log.test', password: 'log watch e2e password' }),
      })
    ).json()) as { api_key: string };
    key = signup.api_key;
  }, 120_000);

  afterAll(async () => {
    await stop();
    rmSync(state, { recursive: true, force: true });
    await store.drop();
  });

  it('passes twice across new runs, then names a leaf rewritten in the store', async () => {
    await closeRuns(3);
    await waitForSize(3);
    const first = await watch();
    expect([first.code, first.err]).toEqual([0, '']);
    expect(first.out).toMatch(/trusting on first use the log keys/);
    expect(first.out).toMatch(/first checkpoint kept; its \d+ leaves audited from the tiles/);
    const size1 = keptSize();
    expect(size1).toBeGreaterThanOrEqual(3);

    await closeRuns(3);
    await waitForSize(size1 + 3);
    const second = await watch();
    expect(second.code).toBe(0);
    expect(second.out).toContain(`consistent with the kept size ${size1} (consistency proof; leaves ${size1}..`);
    const size2 = keptSize();
    expect(size2).toBeGreaterThanOrEqual(size1 + 3);

    await closeRuns(3);
    await waitForSize(size2 + 3);
    await stop();
    // Rewrite the entry of a run the monitor already audited (the history a dishonest operator
    // would change): another root hash, its leaf hash recomputed, stored where tiles are read from.
    const target = size2 - 1;
    const db = await openDb(loadConfig({ 'data-dir': store.dataDir }, { DATABASE_URL: store.databaseUrl ?? '' }));
    try {
      const { rows } = await db.query<Record<string, unknown>>(
        `SELECT run_id, subject_type, subject_id, root_hash, event_count, closed_at FROM log_leaves WHERE leaf_index = $1`,
        [target],
      );
      const leaf = { ...rows[0], root_hash: 'f'.repeat(64) };
      const forged = logRecordHash(Buffer.from(canonicalJson(leaf))).toString('hex');
      await db.query(`UPDATE log_leaves SET root_hash = $2, leaf_hash = decode($3, 'hex') WHERE leaf_index = $1`, [
        target,
        leaf.root_hash,
        forged,
      ]);
      await db.query(`UPDATE log_hashes SET hash = decode($2, 'hex') WHERE idx = $1`, [
        storedHashIndex(0, target),
        forged,
      ]);
    } finally {
      await db.close();
    }
    await start();
    const third = await watch();
    expect(third.code).toBe(1);
    expect(third.out).toMatch(
      new RegExp(`^FAIL {2}leaf ${target}: its hash in tile tile/8/0/000\\.p/\\d+ is not the one audited before`, 'm'),
    );
    expect(keptSize()).toBe(size2);
  }, 180_000);
});

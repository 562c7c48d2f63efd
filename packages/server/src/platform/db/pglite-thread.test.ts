import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestStore, TEST_STORE_KIND, type TestStore } from '../../../test/harness.js';
import { copyPgliteTemplate, PGLITE_TEMPLATE_ENV } from '../../../test/store-template.js';
import type { Db } from './interface.js';
import { StoreChannel, type StoreRequest } from './pglite-channel.js';
import { createPgliteDb } from './pglite.js';

/**
 * The embedded store runs PGlite in a worker thread (pglite.ts): the server's event loop turns
 * while a statement runs, and everything else behaves as when PGlite ran in the server's thread.
 */
describe.runIf(TEST_STORE_KIND === 'pglite')('PGlite in its own thread', () => {
  let store: TestStore;
  let db: Db;
  beforeAll(async () => {
    store = await createTestStore();
    db = await createPgliteDb(join(store.dataDir, 'pgdata'), { buffersMb: store.pgliteBuffersMb });
    await db.exec(`
      CREATE TABLE thread_probe (id text PRIMARY KEY, n int NOT NULL CHECK (n >= 0));
      CREATE FUNCTION thread_probe_added() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM pg_notify('thread_probe', NEW.id); RETURN NULL; END $$;
      CREATE TRIGGER thread_probe_added AFTER INSERT ON thread_probe FOR EACH ROW EXECUTE FUNCTION thread_probe_added();
    `);
  });
  afterAll(async () => {
    await db.close();
    await store.drop();
  });
  /** A store of its own in the test's data dir: a copy of the migrated template when there is one. */
  const migratedCopy = (name: string): string => {
    const dir = join(store.dataDir, name);
    const template = process.env[PGLITE_TEMPLATE_ENV];
    if (template) copyPgliteTemplate(template, dir);
    return dir;
  };

  it('keeps the event loop turning while a statement runs', async () => {
    let ticks = 0;
    const timer = setInterval(() => ticks++, 10);
    try {
      const started = performance.now();
      await db.query('SELECT pg_sleep(0.3)');
      expect(performance.now() - started).toBeGreaterThanOrEqual(290);
    } finally {
      clearInterval(timer);
    }
    // In the server's own thread the 300 ms of the statement would hold every timer back: 0 ticks.
    expect(ticks).toBeGreaterThanOrEqual(5);
  });

  it("rethrows PostgreSQL's errors as Errors with their fields, and the caller's stack", async () => {
    await db.query("INSERT INTO thread_probe VALUES ('dup', 1)");
    const err = await db.query("INSERT INTO thread_probe VALUES ('dup', 2)").catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    expect(err).toMatchObject({
      name: 'error',
      message: 'duplicate key value violates unique constraint "thread_probe_pkey"',
      severity: 'ERROR',
      code: '23505',
      constraint: 'thread_probe_pkey',
      detail: 'Key (id)=(dup) already exists.',
      schema: 'public',
      table: 'thread_probe',
    });
    expect((err as Error).stack).toContain('pglite-thread.test.ts');
    await expect(db.query("INSERT INTO thread_probe VALUES ('neg', -1)")).rejects.toMatchObject({
      code: '23514',
      constraint: 'thread_probe_n_check',
    });
    // Not from PostgreSQL: the thread's own stack follows the caller's.
    const big = await db.query('SELECT 9007199254740993::int8 AS n').catch((e: unknown) => e);
    expect(big).toBeInstanceOf(Error);
    expect((big as Error).message).toBe('int8 value 9007199254740993 exceeds the safe integer range');
    expect((big as Error).stack).toContain("in the store's thread");
  });

  it("never runs another statement between a transaction's statements, and rolls back on a throw", async () => {
    const seen: number[] = [];
    const count = async () =>
      (await db.query<{ n: number }>("SELECT count(*)::int AS n FROM thread_probe WHERE id LIKE 'tx-%'")).rows[0]?.n;
    const tx = db.transaction(async (q) => {
      await q.query("INSERT INTO thread_probe VALUES ('tx-1', 1)");
      // The transaction waits on this thread; statements sent meanwhile wait for its end.
      await new Promise((r) => setTimeout(r, 50));
      await q.query("INSERT INTO thread_probe VALUES ('tx-2', 1)");
      return 'committed';
    });
    const during = [count(), count()].map((p) => p.then((n) => seen.push(n ?? -1)));
    expect(await tx).toBe('committed');
    await Promise.all(during);
    expect(seen).toEqual([2, 2]);

    const thrown = new Error('changed my mind');
    const rolledBack = db.transaction(async (q) => {
      await q.query("INSERT INTO thread_probe VALUES ('tx-3', 1)");
      throw thrown;
    });
    await expect(rolledBack).rejects.toBe(thrown);
    expect(await count()).toBe(2);
  });

  it('hands a NOTIFY raised by SQL to the listeners before the statement that committed it answers', async () => {
    const heard: string[] = [];
    const unlisten = await db.listen('thread_probe', (id) => heard.push(id));
    try {
      await db.query("INSERT INTO thread_probe VALUES ('n-1', 1)");
      expect(heard).toEqual(['n-1']);
      await db.transaction(async (q) => {
        await q.query("INSERT INTO thread_probe VALUES ('n-2', 1)");
        await new Promise((r) => setTimeout(r, 20));
        // Delivered at COMMIT, not before.
        expect(heard).toEqual(['n-1']);
      });
      expect(heard).toEqual(['n-1', 'n-2']);
    } finally {
      await unlisten();
    }
  });

  it('opens the same store again after close, in the thread the closed one left', async () => {
    const dir = migratedCopy('again');
    const first = await createPgliteDb(dir, { buffersMb: store.pgliteBuffersMb });
    await first.exec('CREATE TABLE kept (v text)');
    await first.query("INSERT INTO kept VALUES ('still here')");
    await first.close();
    await expect(first.query('SELECT 1')).rejects.toThrow('the store is closed');
    const again = await createPgliteDb(dir, { buffersMb: 8 });
    try {
      expect((await again.query('SELECT v FROM kept')).rows).toEqual([{ v: 'still here' }]);
      // Each open starts PostgreSQL with the shared buffers it was given (config.ts SVC_PGLITE_BUFFERS_MB).
      expect((await db.query('SHOW shared_buffers')).rows).toEqual([{ shared_buffers: '16MB' }]);
      expect((await again.query<{ shared_buffers: string }>('SHOW shared_buffers')).rows).toEqual([
        { shared_buffers: '8MB' },
      ]);
    } finally {
      await again.close();
    }
  });

  it('refuses a directory it cannot open instead of waiting', async () => {
    // A file where the data directory should be.
    await expect(createPgliteDb(join(store.dataDir, 'pgdata', 'PG_VERSION'))).rejects.toThrow();
  });

  it('lets the process exit when nothing waits for the store, whether it was closed or not', () => {
    const pglite = fileURLToPath(new URL('./pglite.ts', import.meta.url));
    const script = `
      const { createPgliteDb } = await import(${JSON.stringify(pglite)});
      const closed = await createPgliteDb(${JSON.stringify(migratedCopy('closed'))});
      await closed.query('SELECT 1');
      await closed.close();
      const open = await createPgliteDb(${JSON.stringify(migratedCopy('open'))});
      console.log(JSON.stringify((await open.query('SELECT 41 + 1 AS n')).rows));
      const done = performance.now();
      process.on('exit', () => console.log(Math.round(performance.now() - done)));
    `;
    const file = join(store.dataDir, 'exits.mjs');
    writeFileSync(file, script);
    const child = spawnSync(process.execPath, ['--import', 'tsx', file], { encoding: 'utf8', timeout: 60_000 });
    expect(child.stderr).toBe('');
    const [rows, lingered] = child.stdout.trim().split('\n');
    expect(rows).toBe('[{"n":42}]');
    expect(child.status).toBe(0);
    // Not held until the idle thread's 15 s are up, nor by the store left open.
    expect(Number(lingered)).toBeLessThan(3_000);
  }, 60_000);
});

describe('a store whose thread stops', () => {
  it('fails the statements waiting for it and every later one, instead of leaving them pending', async () => {
    // A stand-in for the store's thread that opens, then dies on the second request.
    const thread = new Worker(
      `const { parentPort } = require('node:worker_threads');
       parentPort.on('message', ({ port }) => {
         let n = 0;
         port.on('message', (r) => { if (n++ === 1) process.exit(3); port.postMessage({ id: r.id, value: { rows: [], rowCount: 0 } }); });
         port.postMessage({ ready: true });
       });`,
      { eval: true },
    );
    const channel = await StoreChannel.open(thread, 'unused', () => undefined);
    const request: StoreRequest = { op: 'query', sql: 'SELECT 1', params: [], tx: undefined };
    await expect(channel.request(request)).resolves.toEqual({ rows: [], rowCount: 0 });
    const pending = [channel.request(request), channel.request(request)];
    for (const p of pending) await expect(p).rejects.toThrow("the store's thread stopped with code 3");
    await expect(channel.request(request)).rejects.toThrow("the store's thread stopped with code 3");
    expect(await channel.close()).toBe(false);
  });
});

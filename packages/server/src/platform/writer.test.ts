import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestStore, type TestStore } from '../../test/harness.js';
import { openDb, type Db, type Queryable } from './db/index.js';
import { createWriter } from './writer.js';

/** Counts the transactions the writer opens on `db`. */
function counting(db: Db) {
  const counter = {
    transactions: 0,
    transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
      counter.transactions++;
      return db.transaction(fn);
    },
  };
  return counter;
}

const quiet = { error: () => undefined, warn: () => undefined };

describe('the group-commit writer', () => {
  let store: TestStore;
  let db: Db;
  beforeAll(async () => {
    store = await createTestStore();
    db = await openDb({ dataDir: store.dataDir, databaseUrl: store.databaseUrl });
    await db.exec('CREATE TABLE writer_test (n int PRIMARY KEY, at timestamptz NOT NULL DEFAULT clock_timestamp())');
  });
  afterAll(async () => {
    await db?.close();
    await store?.drop();
  });
  beforeEach(async () => {
    await db.exec('DELETE FROM writer_test');
  });
  const insert = (n: number) => (tx: Queryable) =>
    tx.query('INSERT INTO writer_test (n) VALUES ($1)', [n]).then(() => n);
  const rows = async () => (await db.query<{ n: number }>('SELECT n FROM writer_test ORDER BY at, n')).rows;

  it('commits everything queued within the flush interval in one transaction, in enqueue order', async () => {
    const spy = counting(db);
    const writer = createWriter({ db: spy, log: quiet, flushMs: 20 });
    const values = await Promise.all(Array.from({ length: 50 }, (_, i) => writer.enqueue(insert(i))));
    expect(values).toEqual(Array.from({ length: 50 }, (_, i) => i));
    expect(spy.transactions).toBe(1);
    expect((await rows()).map((r) => r.n)).toEqual(Array.from({ length: 50 }, (_, i) => i));
    await writer.close();
  });

  it('does not commit before the flush: a queued write is invisible until its promise resolves', async () => {
    const writer = createWriter({ db, log: quiet, flushMs: 200 });
    const done = writer.enqueue(insert(7));
    expect(writer.pending).toBe(1);
    expect(await rows()).toEqual([]);
    await done;
    expect(await rows()).toEqual([{ n: 7 }]);
    expect(writer.pending).toBe(0);
    await writer.close();
  });

  it('flushes at once when maxBatch writes are queued, without waiting for the interval', async () => {
    const spy = counting(db);
    const writer = createWriter({ db: spy, log: quiet, flushMs: 60_000, maxBatch: 10 });
    const started = Date.now();
    await Promise.all(Array.from({ length: 30 }, (_, i) => writer.enqueue(insert(i))));
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(spy.transactions).toBe(3);
    expect(await rows()).toHaveLength(30);
    await writer.close();
  });

  it('a failing write rejects alone: the others of its flush are retried one by one and commit', async () => {
    const errors: unknown[] = [];
    const spy = counting(db);
    const writer = createWriter({
      db: spy,
      log: { error: (o: unknown) => errors.push(o), warn: () => undefined },
      flushMs: 20,
    });
    const results = await Promise.allSettled([
      writer.enqueue(insert(1)),
      writer.enqueue(insert(2)),
      writer.enqueue(insert(1)), // duplicate key: fails
      writer.enqueue(insert(3)),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled']);
    expect((await rows()).map((r) => r.n).sort()).toEqual([1, 2, 3]);
    // One failed batch, then one transaction per write.
    expect(spy.transactions).toBe(5);
    expect(errors).toHaveLength(1);
    await writer.close();
  });

  it('settled() flushes at once and waits; close() drains what is queued and refuses more', async () => {
    const writer = createWriter({ db, log: quiet, flushMs: 60_000 });
    const queued = Array.from({ length: 5 }, (_, i) => writer.enqueue(insert(i)));
    const started = Date.now();
    await writer.settled();
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(await rows()).toHaveLength(5);
    const more = [writer.enqueue(insert(10)), writer.enqueue(insert(11))];
    await writer.close();
    await Promise.all([...queued, ...more]);
    expect((await rows()).map((r) => r.n)).toContain(11);
    await expect(writer.enqueue(insert(12))).rejects.toThrow('closed');
    expect(await rows()).toHaveLength(7);
  });
});

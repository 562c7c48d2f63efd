import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestStore, type TestStore } from '../../test/harness.js';
import { openDb, type Db, type Queryable } from './db/index.js';
import { createWriter, WriteFailure, type WriteKind } from './writer.js';

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
    db = await openDb(store);
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

  /** A batched kind inserting all its items with one statement; records each call's items. */
  const batchedInsert = (tag: number, calls: number[][]): WriteKind<number, number> => ({
    name: `insert-${tag}`,
    async writeMany(tx, ns) {
      calls.push([...ns]);
      await tx.query('INSERT INTO writer_test (n) SELECT unnest($1::int[])', [ns]);
      return ns.map((n) => n * 10);
    },
  });

  it('hands every queued item of a kind to one writeMany call per flush, and resolves each with its value', async () => {
    const spy = counting(db);
    const calls: number[][] = [];
    const kind = batchedInsert(1, calls);
    const writer = createWriter({ db: spy, log: quiet, flushMs: 20 });
    const values = await Promise.all(Array.from({ length: 20 }, (_, i) => writer.enqueueAs(kind, i)));
    expect(values).toEqual(Array.from({ length: 20 }, (_, i) => i * 10));
    expect(calls).toEqual([Array.from({ length: 20 }, (_, i) => i)]);
    expect(spy.transactions).toBe(1);
    expect((await rows()).map((r) => r.n).sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i));
    await writer.close();
  });

  it('runs plain writes first, then each kind in the order its first item was queued', async () => {
    const order: string[] = [];
    const first: WriteKind<number, number> = {
      name: 'first',
      writeMany: async (_tx, ns) => (order.push(`first ${ns.join(',')}`), [...ns]),
    };
    const second: WriteKind<number, number> = {
      name: 'second',
      writeMany: async (_tx, ns) => (order.push(`second ${ns.join(',')}`), [...ns]),
    };
    const writer = createWriter({ db, log: quiet, flushMs: 20 });
    await Promise.all([
      writer.enqueueAs(first, 1),
      writer.enqueueAs(second, 2),
      writer.enqueue(async () => order.push('plain')),
      writer.enqueueAs(first, 3),
      writer.enqueueAs(second, 4),
    ]);
    expect(order).toEqual(['plain', 'first 1,3', 'second 2,4']);
    await writer.close();
  });

  it('a failed batch is written again item by item, each a batch of one in its own transaction', async () => {
    const spy = counting(db);
    const calls: number[][] = [];
    const errors: unknown[] = [];
    const kind = batchedInsert(1, calls);
    const writer = createWriter({
      db: spy,
      log: { error: (o: unknown) => errors.push(o), warn: () => undefined },
      flushMs: 20,
    });
    await writer.enqueueAs(kind, 5);
    calls.length = 0;
    const results = await Promise.allSettled([4, 5, 6].map((n) => writer.enqueueAs(kind, n)));
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(results[0]).toEqual({ status: 'fulfilled', value: 40 });
    expect(calls).toEqual([[4, 5, 6], [4], [5], [6]]);
    expect(spy.transactions).toBe(5);
    expect(errors).toHaveLength(1);
    expect((await rows()).map((r) => r.n).sort((a, b) => a - b)).toEqual([4, 5, 6]);
    await writer.close();
  });

  it('a kind returning too few values fails its flush instead of resolving items with nothing', async () => {
    const short: WriteKind<number, number> = { name: 'short', writeMany: async () => [] };
    const writer = createWriter({ db, log: quiet, flushMs: 5 });
    await expect(writer.enqueueAs(short, 1)).rejects.toThrow('short returned 0 values for 1 items');
    await writer.close();
  });

  it('an item the kind refuses alone (a WriteFailure) rejects while the rest of its flush commits', async () => {
    const spy = counting(db);
    const errors: unknown[] = [];
    const odd: WriteKind<number, number> = {
      name: 'even only',
      async writeMany(tx, ns) {
        const even = ns.filter((n) => n % 2 === 0);
        await tx.query('INSERT INTO writer_test (n) SELECT unnest($1::int[])', [even]);
        return ns.map((n) => (n % 2 === 0 ? n : new WriteFailure(new Error(`${n} is odd`))));
      },
    };
    const writer = createWriter({
      db: spy,
      log: { error: (o: unknown) => errors.push(o), warn: () => undefined },
      flushMs: 20,
    });
    const results = await Promise.allSettled([2, 3, 4].map((n) => writer.enqueueAs(odd, n)));
    expect(results).toEqual([
      { status: 'fulfilled', value: 2 },
      { status: 'rejected', reason: new Error('3 is odd') },
      { status: 'fulfilled', value: 4 },
    ]);
    expect(spy.transactions).toBe(1);
    expect(errors).toHaveLength(1);
    expect((await rows()).map((r) => r.n)).toEqual([2, 4]);
    await writer.close();
  });

  it('an item with waitMs waits past the flush interval and rides along with the next flush another write brings', async () => {
    const spy = counting(db);
    const calls: number[][] = [];
    const kind = batchedInsert(1, calls);
    const writer = createWriter({ db: spy, log: quiet, flushMs: 5 });
    let opened = false;
    const opening = writer.enqueueAs(kind, 1, { waitMs: 60_000 }).then((v) => ((opened = true), v));
    // Far past the flush interval, the waiting item is still queued, not committed.
    await new Promise((r) => setTimeout(r, 50));
    expect(opened).toBe(false);
    expect(await rows()).toEqual([]);
    // A write with the plain interval brings a flush that takes both, in one transaction.
    const [first, second] = await Promise.all([opening, writer.enqueueAs(kind, 2)]);
    expect([first, second]).toEqual([10, 20]);
    expect(calls).toEqual([[1, 2]]);
    expect(spy.transactions).toBe(1);
    await writer.close();
  });

  it('an item with waitMs commits alone once its wait is over; hurry() brings its flush forward', async () => {
    const writer = createWriter({ db, log: quiet, flushMs: 5 });
    const started = Date.now();
    await writer.enqueueAs(batchedInsert(1, []), 1, { waitMs: 80 });
    expect(Date.now() - started).toBeGreaterThanOrEqual(75);
    expect((await rows()).map((r) => r.n)).toEqual([1]);
    let hurried = false;
    const waiting = writer.enqueueAs(batchedInsert(1, []), 2, { waitMs: 60_000 }).then(() => (hurried = true));
    await new Promise((r) => setTimeout(r, 20));
    expect(hurried).toBe(false);
    writer.hurry();
    await waiting;
    expect((await rows()).map((r) => r.n)).toEqual([1, 2]);
    await writer.close();
  });

  it('a flush leaves the waiting items queued after its last due one (they wait for their own flush); settled() takes them', async () => {
    const calls: number[][] = [];
    const kind = batchedInsert(1, calls);
    const writer = createWriter({ db, log: quiet, flushMs: 5 });
    const first = writer.enqueueAs(kind, 1, { waitMs: 60_000 });
    const second = writer.enqueueAs(kind, 2);
    let thirdDone = false;
    const third = writer.enqueueAs(kind, 3, { waitMs: 60_000 }).then((v) => ((thirdDone = true), v));
    // 1 is before a due item, so it goes with it; 3 is after the last due item, so it stays.
    expect(await Promise.all([first, second])).toEqual([10, 20]);
    expect(calls).toEqual([[1, 2]]);
    await new Promise((r) => setTimeout(r, 30));
    expect(thirdDone).toBe(false);
    expect(writer.pending).toBe(1);
    await writer.settled();
    expect(await third).toBe(30);
    expect(calls).toEqual([[1, 2], [3]]);
    await writer.close();
  });
});

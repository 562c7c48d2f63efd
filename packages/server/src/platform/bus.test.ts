import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestStore, type TestStore } from '../../test/harness.js';
import { openDb, type Db } from './db/index.js';
import { createDbBus, type Bus } from './bus.js';

/** Resolves once `n` payloads arrived (or fails after 5 s). */
function collect(
  bus: Bus,
  topic: 'jobs' | 'work',
  n: number,
): { got: string[]; done: Promise<void>; stop: Promise<() => Promise<void>> } {
  const got: string[] = [];
  let resolve: () => void = () => undefined;
  const done = new Promise<void>((r, reject) => {
    const timer = setTimeout(() => reject(new Error(`heard ${got.length} of ${n}: ${got.join(', ')}`)), 5_000);
    timer.unref();
    resolve = () => {
      clearTimeout(timer);
      r();
    };
  });
  // A collector the test never waits on (one that must hear nothing) must not fail the run later.
  done.catch(() => undefined);
  const stop = bus.subscribe(topic, (payload) => {
    got.push(payload);
    if (got.length === n) resolve();
  });
  return { got, done, stop };
}

describe('the bus between instances (and within one)', () => {
  let store: TestStore;
  let db: Db;
  let bus: Bus;
  beforeAll(async () => {
    store = await createTestStore();
    db = await openDb(store);
    bus = createDbBus(db);
  });
  afterAll(async () => {
    await db.close();
    await store.drop();
  });

  it('delivers every message of a topic, in order, to every subscriber, and none of another topic', async () => {
    const a = collect(bus, 'jobs', 3);
    const b = collect(bus, 'jobs', 3);
    const other = collect(bus, 'work', 1);
    await Promise.all([a.stop, b.stop, other.stop]);
    for (const payload of ['job_1', 'node:nd_2', 'requeued']) await bus.publish('jobs', payload);
    await Promise.all([a.done, b.done]);
    expect(a.got).toEqual(['job_1', 'node:nd_2', 'requeued']);
    expect(b.got).toEqual(a.got);
    expect(other.got).toEqual([]);
    for (const c of [a, b, other]) await (await c.stop)();
  });

  it('stops delivering to a subscriber that unsubscribed; a failing subscriber does not stop the others', async () => {
    const gone = collect(bus, 'work', 1);
    await (
      await gone.stop
    )();
    const failing = bus.subscribe('work', () => {
      throw new Error('listener bug');
    });
    const kept = collect(bus, 'work', 2);
    await Promise.all([failing, kept.stop]);
    await bus.publish('work', 'wrk_1');
    await bus.publish('work', 'wrk_2');
    await kept.done;
    expect(kept.got).toEqual(['wrk_1', 'wrk_2']);
    expect(gone.got).toEqual([]);
    await (
      await failing
    )();
    await (
      await kept.stop
    )();
  });
});

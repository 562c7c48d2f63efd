import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTestApp,
  createTestStore,
  TEST_STORE_KIND,
  type TestApp,
  type TestStore,
} from '../../../test/harness.js';
import { ERRORS } from '@tus/server';
import { createUploadLocker, tusErrorResponse } from './upload-locks.js';

const onPostgres = TEST_STORE_KIND === 'postgres';

/**
 * Two server instances on one store (on PostgreSQL two apps; PGlite is one process's, so there the
 * two lockers share its app), each with its own locker, as `svc serve` builds them.
 */
describe('tus upload locks shared by server instances', () => {
  let store: TestStore;
  let one: TestApp;
  let two: TestApp;
  beforeAll(async () => {
    store = await createTestStore();
    one = await createTestApp({ store });
    two = onPostgres ? await createTestApp({ store }) : one;
  });
  afterAll(async () => {
    await one.close();
    if (two !== one) await two.close();
    await store.drop();
  });
  const lockerOf = (t: TestApp, options: Parameters<typeof createUploadLocker>[1] = {}) =>
    createUploadLocker({ db: t.ctx.db, bus: t.ctx.bus, log: t.ctx.log }, options);

  it('makes a request on the other instance wait, asks the holder to release, and takes the lock once it is freed', async () => {
    const a = await lockerOf(one);
    const b = await lockerOf(two);
    try {
      const first = a.locker.newLock('cs_x-1');
      let released = 0;
      await first.lock(new AbortController().signal, () => {
        released += 1;
        // The holder ends its request, then unlocks (as tus does when asked to release).
        setTimeout(() => void first.unlock(), 50);
      });
      const second = b.locker.newLock('cs_x-1');
      const started = Date.now();
      await second.lock(new AbortController().signal, () => undefined);
      expect(released).toBe(1);
      expect(Date.now() - started).toBeGreaterThanOrEqual(40);
      const { rows } = await one.ctx.db.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM capture_upload_locks WHERE upload_id = 'cs_x-1'",
      );
      expect(rows[0]?.n).toBe(1);
      await second.unlock();
      const after = await one.ctx.db.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM capture_upload_locks WHERE upload_id = 'cs_x-1'",
      );
      expect(after.rows[0]?.n).toBe(0);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('gives up with tus lock timeout while a holder keeps its lock, and takes over a lock whose lease ran out', async () => {
    const a = await lockerOf(one, { leaseMs: 300 });
    const b = await lockerOf(two, { acquireTimeoutMs: 200 });
    try {
      const held = a.locker.newLock('cs_y-1');
      await held.lock(new AbortController().signal, () => undefined);
      await expect(
        b.locker.newLock('cs_y-1').lock(new AbortController().signal, () => undefined),
      ).rejects.toMatchObject({ status_code: 500, body: 'failed to acquire lock before timeout' });
      // What the client is answered for it: 423 Locked (retry), not tus's 500.
      expect(tusErrorResponse(ERRORS.ERR_LOCK_TIMEOUT)).toMatchObject({ status_code: 423 });
      expect(tusErrorResponse(ERRORS.FILE_NOT_FOUND)).toBeUndefined();
      // An instance that died holds a lock no one renews: it is free once its lease ends (the
      // new locker keeps trying until then).
      await a.close();
      const c = await lockerOf(two, { acquireTimeoutMs: 5_000 });
      try {
        await c.locker.newLock('cs_y-1').lock(new AbortController().signal, () => undefined);
      } finally {
        await c.close();
      }
    } finally {
      await b.close();
    }
  });
});

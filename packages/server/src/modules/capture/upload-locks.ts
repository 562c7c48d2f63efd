import { ERRORS, type Lock, type Locker, type RequestRelease } from '@tus/server';
import type { Logger } from 'pino';
import type { Queryable } from '../../platform/db/index.js';
import type { Bus } from '../../platform/bus.js';
import { randomToken } from '../../platform/ids.js';
import * as store from './store.js';

/**
 * A tus {@link Locker} shared by every `svc serve` instance on one store: a lock is a row of
 * `capture_upload_locks` (migration 0101) held by one request with a lease it renews while it
 * runs, so an instance that dies leaves a lock that expires. A request that finds the upload
 * locked asks its holder to let go (tus's `requestRelease`: the holder ends its request, as when a
 * client resumes after a cut connection the server has not noticed yet) through the bus, which
 * reaches whichever instance holds it, and takes the lock once freed.
 *
 * @example
 * const { locker, close } = await createUploadLocker({ db: ctx.db, bus: ctx.bus, log: ctx.log });
 * new Server({ path, datastore, locker });
 */
export async function createUploadLocker(
  deps: { db: Queryable; bus: Bus; log: Pick<Logger, 'warn'> },
  options: { leaseMs?: number; acquireTimeoutMs?: number; retryMs?: number } = {},
): Promise<{ locker: Locker; close: () => Promise<void> }> {
  const leaseMs = options.leaseMs ?? 30_000;
  const acquireTimeoutMs = options.acquireTimeoutMs ?? 30_000;
  const retryMs = options.retryMs ?? 100;
  const instance = randomToken(12);
  /** Locks held by this instance's requests, by upload id. */
  const held = new Map<string, { holder: string; requestRelease: RequestRelease; renew: NodeJS.Timeout }>();
  const release = (uploadId: string) => {
    const lock = held.get(uploadId);
    if (lock) void Promise.resolve(lock.requestRelease()).catch(() => undefined);
  };
  const unsubscribe = await deps.bus.subscribe('uploads', (payload) => {
    if (payload.startsWith('release:')) release(payload.slice('release:'.length));
  });

  const newLock = (uploadId: string): Lock => {
    const holder = `${instance}-${randomToken(12)}`;
    return {
      async lock(signal, requestRelease) {
        const deadline = Date.now() + acquireTimeoutMs;
        let asked = 0;
        for (;;) {
          if (await store.tryLockUpload(deps.db, uploadId, holder, leaseMs)) {
            const renew = setInterval(() => {
              void store
                .renewUploadLock(deps.db, uploadId, holder, leaseMs)
                .catch((err: unknown) => deps.log.warn({ err, upload_id: uploadId }, 'could not renew an upload lock'));
            }, leaseMs / 3);
            renew.unref();
            held.set(uploadId, { holder, requestRelease, renew });
            return;
          }
          // Ask the holder to let go: at once, then once a second while waiting.
          if (Date.now() - asked >= 1000) {
            asked = Date.now();
            release(uploadId);
            await deps.bus.publish('uploads', `release:${uploadId}`);
          }
          if (signal.aborted || Date.now() > deadline) throw ERRORS.ERR_LOCK_TIMEOUT;
          await new Promise((resolve) => setTimeout(resolve, retryMs));
        }
      },
      async unlock() {
        const lock = held.get(uploadId);
        if (lock?.holder === holder) {
          clearInterval(lock.renew);
          held.delete(uploadId);
        }
        await store.unlockUpload(deps.db, uploadId, holder);
      },
    };
  };

  return {
    locker: { newLock },
    async close() {
      for (const lock of held.values()) clearInterval(lock.renew);
      held.clear();
      await unsubscribe();
    },
  };
}

/**
 * What tus answers for an error, with one change: an upload still locked by another request after
 * tus's wait is `423 Locked` (as tusd answers), not tus's `500`: the client can retry, nothing failed.
 *
 * @example
 * tusErrorResponse(ERRORS.ERR_LOCK_TIMEOUT); // { status_code: 423, body: 'this upload is in use by another request ...' }
 */
export function tusErrorResponse(err: Error | { status_code: number; body: string }) {
  if ('body' in err && err.body === ERRORS.ERR_LOCK_TIMEOUT.body)
    return {
      status_code: 423,
      body: 'this upload is in use by another request (on this or another instance); retry once it ends\n',
    };
  return undefined;
}

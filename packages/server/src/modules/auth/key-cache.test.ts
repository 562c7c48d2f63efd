import { afterEach, describe, expect, it, vi } from 'vitest';
import { bearer, createKey, createTestApp, signUp, type TestApp } from '../../../test/harness.js';
import type { Queryable } from '../../platform/db/index.js';
import type { Bus } from '../../platform/bus.js';
import { createKeyCache } from './key-cache.js';
import type { KeyAuthRow } from './store.js';

const row = (id: string, extra: Partial<KeyAuthRow> = {}): KeyAuthRow => ({
  id,
  org_id: 'org_1',
  buyer_id: 'buy_1',
  hash: 'h',
  scopes: ['buyer'],
  revoked_at: null,
  role: 'owner',
  ...extra,
});

/** A store of key rows that counts reads, and lets a test hold a read until it says so. Tests only. */
function fakeStore(rows: Map<string, KeyAuthRow>) {
  let reads = 0;
  let hold: Promise<void> | undefined;
  const db: Queryable = {
    async query<T>(_sql: string, params?: unknown[]) {
      reads++;
      const found = rows.get(String(params?.[0]));
      const snapshot = found ? { ...found } : undefined;
      if (hold) await hold;
      return { rows: (snapshot ? [snapshot] : []) as T[], rowCount: snapshot ? 1 : 0 };
    },
    exec: async () => undefined,
  } as unknown as Queryable;
  return {
    db,
    reads: () => reads,
    holdReads() {
      let release: () => void = () => undefined;
      hold = new Promise((resolve) => (release = resolve));
      return () => {
        hold = undefined;
        release();
      };
    },
  };
}

/** Two instances' buses joined: what one publishes, both hear. Tests only. */
function sharedBus(): Bus {
  const handlers = new Set<(payload: string) => void>();
  return {
    publish: async (_topic, payload) => {
      for (const h of handlers) h(payload);
    },
    subscribe: async (_topic, handler) => {
      handlers.add(handler);
      return async () => void handlers.delete(handler);
    },
  };
}

const log = { warn: () => undefined };

describe('the key cache', () => {
  it('reads a key once, then answers from memory; a revocation here or on another instance forgets it', async () => {
    const rows = new Map([
      ['key_a', row('key_a')],
      ['key_b', row('key_b', { buyer_id: 'buy_2' })],
    ]);
    const store = fakeStore(rows);
    const bus = sharedBus();
    const here = await createKeyCache({ db: store.db, bus, log });
    const there = await createKeyCache({ db: store.db, bus, log });
    expect((await here.lookup('key_a'))?.revoked_at).toBeNull();
    expect(await here.lookup('key_a')).toMatchObject({ id: 'key_a' });
    expect(store.reads()).toBe(1);

    rows.set('key_a', row('key_a', { revoked_at: new Date() }));
    await there.keyChanged('key_a');
    expect((await here.lookup('key_a'))?.revoked_at).toBeInstanceOf(Date);
    expect(store.reads()).toBe(2);

    // A role change drops every key of that member in that organization, and only those.
    await here.lookup('key_b');
    rows.set('key_b', row('key_b', { buyer_id: 'buy_2', role: null }));
    const before = store.reads();
    await there.memberChanged('org_1', 'buy_2');
    expect((await here.lookup('key_b'))?.role).toBeNull();
    await here.lookup('key_a');
    expect(store.reads()).toBe(before + 1);
    expect(await here.lookup('key_unknown')).toBeUndefined();
    await here.close();
    await there.close();
  });

  it('does not keep a read that began before a revocation, and re-reads an entry older than maxAgeMs', async () => {
    const rows = new Map([['key_a', row('key_a')]]);
    const store = fakeStore(rows);
    const cache = await createKeyCache({ db: store.db, bus: sharedBus(), log }, { maxAgeMs: 30 });
    const release = store.holdReads();
    const racing = cache.lookup('key_a');
    rows.set('key_a', row('key_a', { revoked_at: new Date() }));
    await cache.keyChanged('key_a');
    release();
    expect((await racing)?.revoked_at).toBeNull(); // that request began before the revocation
    expect((await cache.lookup('key_a'))?.revoked_at).toBeInstanceOf(Date);
    expect(store.reads()).toBe(2);
    // The entry ages past maxAgeMs: the clock moves on, no waiting.
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() + 31 });
    try {
      await cache.lookup('key_a');
    } finally {
      vi.useRealTimers();
    }
    expect(store.reads()).toBe(3);
    await cache.close();
  });
});

describe('keys checked in memory, through the app', () => {
  let t: TestApp;
  afterEach(async () => t.close());

  it('a used key is refused on the very next request after its revoke call answers', async () => {
    t = await createTestApp();
    const owner = await signUp(t.app);
    const key = await createKey(t.app, owner, ['read-only']);
    const me = () => t.app.inject({ method: 'GET', url: '/api/v1/auth/me', headers: bearer(key) });
    expect((await me()).statusCode).toBe(200);
    expect((await me()).statusCode).toBe(200);
    const keyId = key.split('_')[2];
    const revoke = await t.app.inject({
      method: 'POST',
      url: `/api/v1/auth/api-keys/${keyId}/revoke`,
      headers: bearer(owner.token),
      payload: { reason: 'test' },
    });
    expect(revoke.statusCode).toBe(200);
    expect((await me()).statusCode).toBe(401);
  }, 120_000);
});

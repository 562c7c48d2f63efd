import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { Queryable } from '../../platform/db/index.js';
import type { Bus } from '../../platform/bus.js';
import { findKeyForAuth, type KeyAuthRow } from './store.js';

/**
 * API keys as this process last read them, so that a request is authenticated without a
 * statement (docs/authentication.md, "How fast a revocation takes effect"). Entries are dropped
 * at once in this process and, over the bus (`keys` topic), on every other instance when a key is
 * revoked or its creator's role or membership changes; an entry older than `maxAgeMs` is read
 * again before use, which bounds how long a key can outlive its revocation even if a bus message
 * is lost.
 */
export interface KeyCache {
  /** The key's row with its creator's role: from memory, or read from the store (and kept). Undefined when no such key. */
  lookup(keyId: string): Promise<KeyAuthRow | undefined>;
  /**
   * A key was revoked or changed (call after the commit): forgotten here at once, and on every
   * instance through the bus; resolves once this instance heard its own message back (PostgreSQL
   * has handed it to every listener), or after 250 ms.
   */
  keyChanged(keyId: string): Promise<void>;
  /** A member's role or membership changed (after the commit): their keys in that organization are forgotten everywhere. */
  memberChanged(orgId: string, buyerId: string): Promise<void>;
  close(): Promise<void>;
}

/** The most a cached key is used before it is read again (the bound when a bus message is lost). */
export const KEY_CACHE_MAX_AGE_MS = 1_000;
const MAX_ENTRIES = 100_000;
/** How long a revoke call waits to hear its own bus message back (it answers regardless after that). */
const ECHO_WAIT_MS = 250;

interface Entry {
  row: KeyAuthRow;
  at: number;
}

/**
 * Builds the cache (one per process: `ctx.keyCache`). A read that began before an invalidation
 * is not kept (a counter of invalidations), so a key can never come back from a read older than
 * its revocation.
 *
 * @example
 * const keys = await createKeyCache({ db, bus, log });
 * const row = await keys.lookup('key_01...');
 */
export async function createKeyCache(
  ctx: { db: Queryable; bus: Bus; log: Pick<Logger, 'warn'> },
  options: { maxAgeMs?: number } = {},
): Promise<KeyCache> {
  const maxAgeMs = options.maxAgeMs ?? KEY_CACHE_MAX_AGE_MS;
  const entries = new Map<string, Entry>();
  let invalidations = 0;
  const forgetKey = (keyId: string) => {
    invalidations++;
    entries.delete(keyId);
  };
  const forgetMember = (orgId: string, buyerId: string) => {
    invalidations++;
    for (const [id, entry] of entries)
      if (entry.row.org_id === orgId && entry.row.buyer_id === buyerId) entries.delete(id);
  };
  // Our own messages coming back: the invalidation has gone out to every instance's listener.
  const echoes = new Map<string, () => void>();
  const unsubscribe = await ctx.bus.subscribe('keys', (payload) => {
    const [kind, a, b, c] = payload.split(':');
    if (kind === 'key' && a) forgetKey(a);
    else if (kind === 'member' && a && b) forgetMember(a, b);
    const tag = kind === 'key' ? b : c;
    if (tag) echoes.get(tag)?.();
  });
  /** Publishes and waits (up to ECHO_WAIT_MS) until this instance hears it back from the bus. */
  const announce = async (payload: string) => {
    const tag = randomUUID().replaceAll('-', '');
    let heard: () => void = () => undefined;
    const echoed = new Promise<void>((resolve) => (heard = resolve));
    echoes.set(tag, heard);
    try {
      await ctx.bus.publish('keys', `${payload}:${tag}`);
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([echoed, new Promise<void>((resolve) => (timer = setTimeout(resolve, ECHO_WAIT_MS)))]);
      clearTimeout(timer);
    } finally {
      echoes.delete(tag);
    }
  };
  return {
    async lookup(keyId) {
      const hit = entries.get(keyId);
      if (hit && Date.now() - hit.at <= maxAgeMs) return hit.row;
      const seen = invalidations;
      const at = Date.now();
      const row = await findKeyForAuth(ctx.db, keyId);
      if (!row) {
        entries.delete(keyId);
        return undefined;
      }
      if (invalidations === seen) {
        if (entries.size >= MAX_ENTRIES) entries.clear();
        entries.set(keyId, { row, at });
      }
      return row;
    },
    async keyChanged(keyId) {
      forgetKey(keyId);
      await announce(`key:${keyId}`);
    },
    async memberChanged(orgId, buyerId) {
      forgetMember(orgId, buyerId);
      await announce(`member:${orgId}:${buyerId}`);
    },
    async close() {
      entries.clear();
      await unsubscribe().catch((err: unknown) => ctx.log.warn({ err }, 'key cache: could not unsubscribe'));
    },
  };
}

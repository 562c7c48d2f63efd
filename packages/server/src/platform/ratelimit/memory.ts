import type { RateDecision, RateLimiter, RateRule } from './interface.js';
import { isFull, takeTokens, type BucketState } from './token-bucket.js';

export interface MemoryRateLimiterOptions {
  /** Most buckets kept; beyond it the least recently used are forgotten (they refill at once). */
  maxKeys?: number;
  /** Milliseconds from a clock that never goes backwards. Tests may pass a fake one. */
  now?: () => number;
}

/** An in-process limiter, plus how many buckets it currently holds (for tests and metrics). */
export interface MemoryRateLimiter extends RateLimiter {
  readonly kind: 'memory';
  readonly size: number;
}

interface CachedBucket extends BucketState {
  /** When this bucket will have refilled completely, so it can be dropped without changing anything. */
  fullAtMs: number;
}

/** How many least-recently-used buckets each take checks for having refilled completely. */
const SWEEP_PER_TAKE = 4;

/**
 * Rate limits in this process only: each `svc serve` instance counts on its own. The buckets
 * are a deliberate cache, bounded by `maxKeys` with least-recently-used eviction; a bucket that
 * has refilled completely equals no bucket and is dropped lazily.
 *
 * @example
 * const limiter = createMemoryRateLimiter({ maxKeys: 10_000 });
 * const decision = await limiter.take(`key:${keyId}`, { ratePerSec: 10, burst: 20 });
 * if (!decision.allowed) reply.header('retry-after', String(decision.retryAfterSeconds));
 */
export function createMemoryRateLimiter(options: MemoryRateLimiterOptions = {}): MemoryRateLimiter {
  const maxKeys = options.maxKeys ?? 100_000;
  if (!(Number.isInteger(maxKeys) && maxKeys > 0))
    throw new RangeError(`maxKeys must be a positive integer, got ${maxKeys}`);
  const now = options.now ?? (() => performance.now());
  // Map iteration follows insertion order; re-inserting on every take keeps the least recently
  // used bucket first.
  const bucketCache = new Map<string, CachedBucket>();

  function sweep(nowMs: number): void {
    let checked = 0;
    for (const [key, bucket] of bucketCache) {
      if (checked++ >= SWEEP_PER_TAKE || bucket.fullAtMs > nowMs) break;
      bucketCache.delete(key);
    }
  }

  return {
    kind: 'memory',
    get size() {
      return bucketCache.size;
    },
    async take(key: string, rule: RateRule, cost = 1): Promise<RateDecision> {
      const nowMs = now();
      const cached = bucketCache.get(key);
      const { state, decision } = takeTokens(cached, rule, cost, nowMs);
      bucketCache.delete(key);
      if (!isFull(rule, state.tokens)) {
        bucketCache.set(key, { ...state, fullAtMs: nowMs + ((rule.burst - state.tokens) * 1000) / rule.ratePerSec });
        for (const oldest of bucketCache.keys()) {
          if (bucketCache.size <= maxKeys) break;
          bucketCache.delete(oldest);
        }
      }
      sweep(nowMs);
      return decision;
    },
    async close() {
      bucketCache.clear();
    },
  };
}

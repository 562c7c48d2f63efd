import type { RateLimiter } from './interface.js';
import { createMemoryRateLimiter, type MemoryRateLimiterOptions } from './memory.js';
import { createRedisRateLimiter, type RedisRateLimiterOptions } from './redis.js';

export type { RateDecision, RateLimiter, RateRule } from './interface.js';
export { createMemoryRateLimiter, type MemoryRateLimiter, type MemoryRateLimiterOptions } from './memory.js';
export { createRedisRateLimiter, REDIS_KEY_PREFIX, type RedisRateLimiterOptions } from './redis.js';
export { takeTokens, type BucketState } from './token-bucket.js';

/**
 * The limiter the configuration names: shared through Redis when `redisUrl` is set (falling back
 * to this process's memory while Redis is unreachable), else in this process only.
 * `maxKeys` and `now` size and time the in-process buckets (the Redis limiter's fallback too,
 * unless `fallback` says otherwise).
 *
 * @example
 * const limiter = createRateLimiter(config, { onError: (err) => log.warn({ err }, 'rate limiter fell back to memory') });
 * const decision = await limiter.take(`key:${keyId}`, { ratePerSec: 10, burst: 20 });
 */
export function createRateLimiter(
  config: { redisUrl?: string | undefined },
  options: RedisRateLimiterOptions & MemoryRateLimiterOptions = {},
): RateLimiter {
  if (config.redisUrl)
    return createRedisRateLimiter(config.redisUrl, {
      fallback: { maxKeys: options.maxKeys, now: options.now },
      ...options,
    });
  return createMemoryRateLimiter(options);
}

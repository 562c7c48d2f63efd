import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';
import type { RateDecision, RateLimiter, RateRule } from './interface.js';
import { createMemoryRateLimiter, type MemoryRateLimiterOptions } from './memory.js';
import { assertRule, decide, TOKEN_EPSILON } from './token-bucket.js';

export interface RedisRateLimiterOptions {
  /** Called with every error that made a take fall back to the in-process limiter. Nothing else logs. */
  onError?: (err: Error) => void;
  /** How long to wait for a TCP connection and the ready check. Default 1000 ms. */
  connectTimeoutMs?: number;
  /** How long one take may wait for Redis before falling back. Default 500 ms. */
  commandTimeoutMs?: number;
  /** Options of the in-process limiter used while Redis is unreachable. */
  fallback?: MemoryRateLimiterOptions;
}

/** Every bucket lives under this prefix, as a hash `{tokens, ms}`. */
export const REDIS_KEY_PREFIX = 'svc:rl:';

/**
 * The token bucket of token-bucket.ts, done atomically in Redis with Redis's own clock (`TIME`),
 * so that every instance sharing the server agrees on elapsed time. A full bucket is deleted;
 * otherwise it expires once it would have refilled, plus 1 s.
 * KEYS[1] bucket; ARGV ratePerSec, burst, cost. Returns {allowed 0|1, tokens left as a string}.
 */
const TAKE_LUA = `
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local eps = ${TOKEN_EPSILON}
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + tonumber(time[2]) / 1000
local tokens = burst
local saved = redis.call('HMGET', KEYS[1], 'tokens', 'ms')
if saved[1] and saved[2] then
  local elapsed = now - tonumber(saved[2])
  if elapsed < 0 then elapsed = 0 end
  tokens = math.min(burst, tonumber(saved[1]) + elapsed * rate / 1000)
end
local allowed = 0
if tokens + eps >= cost then
  allowed = 1
  tokens = math.max(0, tokens - cost)
end
if tokens + eps >= burst then
  redis.call('DEL', KEYS[1])
else
  redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens), 'ms', string.format('%.17g', now))
  redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) * 1000 / rate) + 1000)
end
return { allowed, string.format('%.17g', tokens) }
`;
const TAKE_SHA = createHash('sha1').update(TAKE_LUA).digest('hex');

function toError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}

function parseReply(reply: unknown): { allowed: boolean; tokens: number } {
  if (Array.isArray(reply) && reply.length === 2) {
    const [allowed, tokensRaw] = reply as unknown[];
    const tokens = Number(
      typeof tokensRaw === 'string' || Buffer.isBuffer(tokensRaw) ? tokensRaw.toString() : Number.NaN,
    );
    if ((allowed === 0 || allowed === 1) && Number.isFinite(tokens)) return { allowed: allowed === 1, tokens };
  }
  throw new Error('unexpected reply from the rate-limit script');
}

/**
 * Rate limits shared by every instance through Redis (keys `svc:rl:<key>`). It fails safe: it
 * never queues commands while disconnected, waits at most `connectTimeoutMs` for the first
 * connection and `commandTimeoutMs` per take, and on any error decides that take with an
 * in-process limiter instead (reporting the error to `onError`). It reconnects in the background.
 *
 * @example
 * const limiter = createRedisRateLimiter('redis://127.0.0.1:6379', { onError: (err) => log.warn({ err }, 'rate limiter fell back to memory') });
 * const decision = await limiter.take(`key:${keyId}`, { ratePerSec: 10, burst: 20 });
 * await limiter.close();
 */
export function createRedisRateLimiter(url: string, options: RedisRateLimiterOptions = {}): RateLimiter {
  const connectTimeoutMs = options.connectTimeoutMs ?? 1000;
  const redis = new Redis(url, {
    maxRetriesPerRequest: 1,
    enableOfflineQueue: false,
    connectTimeout: connectTimeoutMs,
    commandTimeout: options.commandTimeoutMs ?? 500,
  });
  // Connection errors repeat on every reconnect attempt; they reach the caller through the takes
  // that fail, not from here.
  redis.on('error', () => undefined);
  const fallback = createMemoryRateLimiter(options.fallback);

  // Without an offline queue, a take issued while the first connection is still being made would
  // fail; so takes wait for that first outcome (bounded). Later outages fail fast instead.
  const firstContact = new Promise<void>((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      redis.off('ready', done).off('error', done).off('end', done);
      resolve();
    };
    const timer = setTimeout(done, connectTimeoutMs);
    timer.unref();
    redis.once('ready', done).once('error', done).once('end', done);
  });

  async function takeInRedis(key: string, rule: RateRule, cost: number): Promise<RateDecision> {
    const args = [REDIS_KEY_PREFIX + key, String(rule.ratePerSec), String(rule.burst), String(cost)];
    let reply: unknown;
    try {
      reply = await redis.evalsha(TAKE_SHA, 1, ...args);
    } catch (err) {
      if (!toError(err).message.startsWith('NOSCRIPT')) throw err;
      reply = await redis.eval(TAKE_LUA, 1, ...args);
    }
    const { allowed, tokens } = parseReply(reply);
    return decide(rule, cost, allowed, tokens);
  }

  return {
    kind: 'redis',
    async take(key: string, rule: RateRule, cost = 1): Promise<RateDecision> {
      assertRule(rule, cost);
      await firstContact;
      try {
        return await takeInRedis(key, rule, cost);
      } catch (err) {
        options.onError?.(toError(err));
        return fallback.take(key, rule, cost);
      }
    },
    async close() {
      await fallback.close();
      if (redis.status === 'ready') {
        try {
          await redis.quit();
          return;
        } catch {
          // fall through to a hard disconnect
        }
      }
      redis.disconnect();
    },
  };
}

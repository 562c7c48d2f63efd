import { randomUUID } from 'node:crypto';
import { createServer, type Socket } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from '../../../test/waits.js';
import { createRateLimiter } from './index.js';
import type { RateLimiter } from './interface.js';
import { createRedisRateLimiter, REDIS_KEY_PREFIX } from './redis.js';

const redisUrl = process.env.SVC_TEST_REDIS_URL;
if (!redisUrl) console.log('[svc test] SKIPPED Redis rate-limit tests: SVC_TEST_REDIS_URL not set');
const describeWithRedis = redisUrl ? describe : describe.skip;

/** A loopback port nothing listens on (bound, then released). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no port');
  return address.port;
}

describeWithRedis('redis rate limiter', () => {
  const url = redisUrl ?? '';
  const run = `test-${randomUUID()}`; // every run gets its own keys
  const errors: Error[] = [];
  let a: RateLimiter;
  let b: RateLimiter;
  let raw: Redis;
  beforeAll(() => {
    // Two limiters, two connections: what two `svc serve` processes would have.
    a = createRedisRateLimiter(url, { onError: (err) => errors.push(err) });
    b = createRateLimiter({ redisUrl: url }, { onError: (err) => errors.push(err) });
    raw = new Redis(url);
  });
  afterAll(async () => {
    await Promise.all([a.close(), b.close()]);
    const leftovers = await raw.keys(`${REDIS_KEY_PREFIX}${run}:*`);
    if (leftovers.length > 0) await raw.del(...leftovers);
    raw.disconnect();
    expect(errors).toEqual([]);
  });

  it('lets exactly burst through across two instances hammering one key', async () => {
    const rule = { ratePerSec: 0.001, burst: 10 };
    const key = `${run}:shared`;
    const decisions = await Promise.all(Array.from({ length: 50 }, (_, i) => (i % 2 === 0 ? a : b).take(key, rule)));
    expect(decisions.filter((d) => d.allowed)).toHaveLength(10);
    const denied = decisions.filter((d) => !d.allowed);
    expect(denied).toHaveLength(40);
    for (const d of denied) expect(d).toMatchObject({ limit: 10, remaining: 0, retryAfterSeconds: 1000 });
    expect(a.kind).toBe('redis');
    expect(b.kind).toBe('redis');
  });

  it('refills, and an instance sees what the other took', async () => {
    // A slow refill (one token a second), so a loaded machine's pauses cannot refill a second token
    // between the two takes once the first is back.
    const rule = { ratePerSec: 1, burst: 3 };
    const key = `${run}:refill`;
    const started = Date.now();
    for (let i = 0; i < 3; i++) expect((await a.take(key, rule)).allowed).toBe(true);
    expect(await b.take(key, rule)).toMatchObject({ allowed: false, remaining: 0, retryAfterSeconds: 1 });
    // A refused take takes nothing: poll until the refilled token is there.
    await eventually(async () => (await b.take(key, rule)).allowed, 5_000);
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    expect((await a.take(key, rule)).allowed).toBe(false);
  });

  it('answers like the in-process bucket for the same sequence', async () => {
    const rule = { ratePerSec: 1, burst: 10 };
    const key = `${run}:parity`;
    const decisions = [];
    for (const cost of [1, 3, 5, 2, 0, 11]) decisions.push(await a.take(key, rule, cost));
    expect(decisions).toEqual([
      { allowed: true, limit: 10, remaining: 9, resetSeconds: 1, retryAfterSeconds: 0 },
      { allowed: true, limit: 10, remaining: 6, resetSeconds: 4, retryAfterSeconds: 0 },
      { allowed: true, limit: 10, remaining: 1, resetSeconds: 9, retryAfterSeconds: 0 },
      { allowed: false, limit: 10, remaining: 1, resetSeconds: 9, retryAfterSeconds: 1 },
      { allowed: true, limit: 10, remaining: 1, resetSeconds: 9, retryAfterSeconds: 0 },
      { allowed: false, limit: 10, remaining: 1, resetSeconds: 9, retryAfterSeconds: 9 },
    ]);
  });

  it('stores a bucket under svc:rl: expiring once refilled plus 1 s, and no full bucket at all', async () => {
    const rule = { ratePerSec: 1, burst: 5 };
    const key = `${run}:stored`;
    await a.take(key, rule, 2);
    const stored = await raw.hgetall(REDIS_KEY_PREFIX + key);
    expect(Number(stored.tokens)).toBeCloseTo(3, 2);
    expect(Number(stored.ms)).toBeGreaterThan(Date.now() - 60_000);
    const ttl = await raw.pttl(REDIS_KEY_PREFIX + key);
    expect(ttl).toBeGreaterThan(2_500);
    expect(ttl).toBeLessThanOrEqual(3_000);
    await a.take(`${run}:peek`, rule, 0);
    expect(await raw.exists(REDIS_KEY_PREFIX + `${run}:peek`)).toBe(0);
  });

  it('reloads its script after SCRIPT FLUSH', async () => {
    await raw.script('FLUSH');
    expect(await a.take(`${run}:flushed`, { ratePerSec: 1, burst: 2 })).toMatchObject({ allowed: true, remaining: 1 });
  });
});

describe('redis rate limiter without a reachable Redis', () => {
  it('decides within 2 s from memory, reports the error, and still limits', async () => {
    const errors: Error[] = [];
    const limiter = createRedisRateLimiter(`redis://127.0.0.1:${await closedPort()}`, {
      onError: (err) => errors.push(err),
    });
    const rule = { ratePerSec: 0.001, burst: 2 };
    const started = Date.now();
    const first = await limiter.take('k', rule);
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(first).toMatchObject({ allowed: true, remaining: 1 });
    expect((await limiter.take('k', rule)).allowed).toBe(true);
    expect(await limiter.take('k', rule)).toMatchObject({ allowed: false, retryAfterSeconds: 1000 });
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(errors).toHaveLength(3);
    expect(errors[0]).toBeInstanceOf(Error);
    await limiter.close();
  });

  it('stops waiting for a server that accepts connections but never answers', async () => {
    const sockets: Socket[] = [];
    const silent = createServer((socket) => sockets.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const address = silent.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    const errors: Error[] = [];
    const limiter = createRedisRateLimiter(`redis://127.0.0.1:${address.port}`, {
      onError: (err) => errors.push(err),
      connectTimeoutMs: 300,
    });
    const started = Date.now();
    expect(await limiter.take('k', { ratePerSec: 1, burst: 1 })).toMatchObject({ allowed: true, remaining: 0 });
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(errors).toHaveLength(1);
    await limiter.close();
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => silent.close(() => resolve()));
  });
});

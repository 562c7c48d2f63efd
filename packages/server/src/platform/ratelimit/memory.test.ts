import { describe, expect, it } from 'vitest';
import { createMemoryRateLimiter } from './memory.js';

const rule = { ratePerSec: 20, burst: 3 };

describe('memory rate limiter', () => {
  it('denies once the burst is spent, with a Retry-After, and allows again after a refill', async () => {
    let clock = 1_000;
    const limiter = createMemoryRateLimiter({ now: () => clock });
    const burst = await Promise.all([1, 2, 3].map(() => limiter.take('k', rule)));
    expect(burst.map((d) => d.allowed)).toEqual([true, true, true]);
    expect(burst.map((d) => d.remaining).sort()).toEqual([0, 1, 2]);
    const denied = await limiter.take('k', rule);
    expect(denied).toMatchObject({ allowed: false, limit: 3, remaining: 0, retryAfterSeconds: 1, resetSeconds: 1 });
    clock += 40; // one token per 50 ms: not yet
    expect((await limiter.take('k', rule)).allowed).toBe(false);
    clock += 10;
    expect((await limiter.take('k', rule)).allowed).toBe(true);
    await limiter.close();
  });

  it('keeps keys independent', async () => {
    const limiter = createMemoryRateLimiter();
    for (let i = 0; i < 3; i++) await limiter.take('a', rule);
    expect((await limiter.take('a', rule)).allowed).toBe(false);
    expect(await limiter.take('b', rule)).toMatchObject({ allowed: true, remaining: 2 });
    expect(limiter.kind).toBe('memory');
  });

  it('takes cost tokens at once and refuses a cost above burst outright', async () => {
    const limiter = createMemoryRateLimiter();
    expect(await limiter.take('k', rule, 2)).toMatchObject({ allowed: true, remaining: 1 });
    expect(await limiter.take('k', rule, 2)).toMatchObject({ allowed: false, remaining: 1 });
    expect(await limiter.take('other', rule, 4)).toMatchObject({ allowed: false, limit: 3, remaining: 3 });
    await expect(limiter.take('k', { ratePerSec: 0, burst: 1 })).rejects.toThrow(RangeError);
  });

  it('never holds more than maxKeys buckets', async () => {
    const limiter = createMemoryRateLimiter({ maxKeys: 50 });
    for (let i = 0; i < 1000; i++) await limiter.take(`k${i}`, { ratePerSec: 0.001, burst: 5 });
    expect(limiter.size).toBe(50);
  });

  it('forgets the least recently used bucket, not the oldest one', async () => {
    const slow = { ratePerSec: 0.001, burst: 1 };
    const limiter = createMemoryRateLimiter({ maxKeys: 3 });
    for (const key of ['a', 'b', 'c']) expect((await limiter.take(key, slow)).allowed).toBe(true);
    expect((await limiter.take('a', slow)).allowed).toBe(false); // touches a: b is now least recent
    expect((await limiter.take('d', slow)).allowed).toBe(true); // evicts b
    expect(limiter.size).toBe(3);
    expect((await limiter.take('a', slow)).allowed).toBe(false);
    expect((await limiter.take('d', slow)).allowed).toBe(false);
    expect((await limiter.take('b', slow)).allowed).toBe(true); // forgotten, so full again
  });

  it('drops buckets that have refilled completely, and never stores a full one', async () => {
    let nowMs = 0;
    const limiter = createMemoryRateLimiter({ now: () => nowMs });
    const fast = { ratePerSec: 1, burst: 2 };
    await limiter.take('a', fast);
    await limiter.take('b', fast, 2);
    expect(limiter.size).toBe(2);
    nowMs = 1000; // a is full again, b holds one token
    await limiter.take('c', fast, 0);
    expect(limiter.size).toBe(1);
    expect(await limiter.take('b', fast, 2)).toMatchObject({ allowed: false, remaining: 1 });
    nowMs = 3000;
    await limiter.take('c', fast, 0);
    expect(limiter.size).toBe(0);
    await limiter.take('d', fast);
    await limiter.close();
    expect(limiter.size).toBe(0);
  });
});

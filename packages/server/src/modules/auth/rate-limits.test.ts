import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createKey, createTestApp, eventually, signUp, type TestApp } from '../../../test/harness.js';

describe('rate limits', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({
      env: {
        SVC_RATE_LIMIT_RPS: '0.01',
        SVC_RATE_LIMIT_BURST: '3',
        SVC_ORG_RATE_LIMIT_RPS: '0.01',
        SVC_ORG_RATE_LIMIT_BURST: '5',
        SVC_ANON_RATE_LIMIT_RPS: '0.01',
        SVC_ANON_RATE_LIMIT_BURST: '2',
      },
    });
  });
  afterAll(() => t.close());

  it('limits each key with a token bucket and says so in headers on every response', async () => {
    const buyer = await signUp(t.app);
    const key = await createKey(t.app, buyer, ['buyer']);
    const statuses: number[] = [];
    const remaining: string[] = [];
    for (let i = 0; i < 4; i++) {
      const res = await t.app.inject({ method: 'GET', url: '/api/v1/auth/me', headers: bearer(key) });
      statuses.push(res.statusCode);
      remaining.push(String(res.headers['x-ratelimit-remaining']));
      expect(res.headers['x-ratelimit-limit']).toBe('3');
      expect(Number(res.headers['x-ratelimit-reset'])).toBeGreaterThan(0);
      if (res.statusCode === 429) {
        expect(res.json()).toMatchObject({ code: 429, error: 'rate_limited' });
        expect(Number(res.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      }
    }
    expect(statuses).toEqual([200, 200, 200, 429]);
    expect(remaining).toEqual(['2', '1', '0', '0']);
  });

  it('limits the organization across its keys', async () => {
    const buyer = await signUp(t.app);
    // sign-up used none of the org's tokens; two keys of 3 each exceed the org's 5 together.
    const a = await createKey(t.app, buyer, ['buyer']);
    const b = await createKey(t.app, buyer, ['buyer']);
    const statuses: number[] = [];
    for (const key of [a, a, a, b, b, b])
      statuses.push((await t.app.inject({ method: 'GET', url: '/api/v1/auth/me', headers: bearer(key) })).statusCode);
    // createKey itself spent 2 of the org's 5 tokens (through the first key).
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThanOrEqual(3);
    expect(statuses.slice(0, 3)).toEqual([200, 200, 200]);
  });

  it('limits anonymous callers per address, but never health checks', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++)
      statuses.push(
        (await t.app.inject({ method: 'GET', url: '/api/v1/downloads', remoteAddress: '192.0.2.7' })).statusCode,
      );
    expect(statuses).toEqual([200, 200, 429]);
    for (let i = 0; i < 5; i++)
      expect(
        (await t.app.inject({ method: 'GET', url: '/api/v1/health', remoteAddress: '192.0.2.7' })).statusCode,
      ).toBe(200);
  });
});

const redisUrl = process.env.SVC_TEST_REDIS_URL;
if (!redisUrl) console.log('[svc test] SKIPPED shared rate limits across instances: SVC_TEST_REDIS_URL not set');

describe.skipIf(!redisUrl)('rate limits shared through Redis', () => {
  it('two instances together allow one burst, not two', async () => {
    const env = { SVC_REDIS_URL: redisUrl ?? '', SVC_ANON_RATE_LIMIT_RPS: '0.01', SVC_ANON_RATE_LIMIT_BURST: '4' };
    const one = await createTestApp({ env });
    const two = await createTestApp({ env });
    try {
      // Opening an embedded store blocks the event loop for seconds, which can time out the first
      // Redis connection (the limiter then counts in memory until it reconnects): wait until both
      // instances count in Redis, that is until a probe bucket of one token taken by one is empty
      // for the other (a limiter counting in memory would allow both takes).
      let probe = 0;
      await eventually(async () => {
        const key = `probe:${process.pid}:${Date.now()}:${probe++}`;
        const rule = { ratePerSec: 0.001, burst: 1 };
        const first = await one.ctx.rateLimiter.take(key, rule);
        const second = await two.ctx.rateLimiter.take(key, rule);
        return first.allowed && !second.allowed;
      }, 20_000);
      const address = `192.0.2.${Math.floor(Math.random() * 250) + 1}`;
      const calls = Array.from({ length: 12 }, (_, i) =>
        (i % 2 === 0 ? one : two).app.inject({ method: 'GET', url: '/api/v1/downloads', remoteAddress: address }),
      );
      const statuses = (await Promise.all(calls)).map((r) => r.statusCode);
      expect(statuses.filter((s) => s === 200)).toHaveLength(4);
      expect(statuses.filter((s) => s === 429)).toHaveLength(8);
      expect(one.ctx.rateLimiter.kind).toBe('redis');
    } finally {
      await one.close();
      await two.close();
    }
    // Two embedded stores are opened here: on a loaded machine that alone can take most of 30 s.
  }, 120_000);
});

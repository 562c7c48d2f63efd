import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../../../test/harness.js';

let counter = 0;
/** One sign-up from `remoteAddress` (the socket's peer), optionally through `X-Forwarded-For`. */
async function signUpFrom(t: TestApp, remoteAddress: string, forwardedFor?: string): Promise<number> {
  counter += 1;
  const res = await t.app.inject({
    method: 'POST',
    url: '/api/v1/auth/signup',
    remoteAddress,
    ...(forwardedFor ? { headers: { 'x-forwarded-for': forwardedFor } } : {}),
    payload: { email: `addr${counter}-${Date.now()}@example.test`, password: 'correct horse battery staple' },
  });
  return res.statusCode;
}

const env = { SVC_SIGNUP_RATE_LIMIT_BURST: '2', SVC_SIGNUP_RATE_LIMIT_PER_HOUR: '0.001' };

describe('the sign-up limit counts an IPv6 client by its /64', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ env });
  });
  afterAll(() => t.close());

  it('addresses of one /64 share one bucket; another /64 has its own', async () => {
    const statuses = [
      await signUpFrom(t, '2001:db8:1:2::1'),
      await signUpFrom(t, '2001:db8:1:2::2'),
      // The same /64 again, written another way: the bucket is empty.
      await signUpFrom(t, '2001:db8:1:2:ffff:eeee:dddd:3'),
    ];
    expect(statuses).toEqual([201, 201, 429]);
    expect(await signUpFrom(t, '2001:db8:1:3::1')).toBe(201);
  });

  it('an IPv4 client arriving as IPv4-mapped IPv6 shares its IPv4 bucket', async () => {
    expect([await signUpFrom(t, '192.0.2.44'), await signUpFrom(t, '::ffff:192.0.2.44')]).toEqual([201, 201]);
    expect(await signUpFrom(t, '192.0.2.44')).toBe(429);
  });

  it('the login limit per address uses the same buckets', async () => {
    const login = async (remoteAddress: string, i: number) =>
      (
        await t.app.inject({
          method: 'POST',
          url: '/api/v1/auth/login',
          remoteAddress,
          payload: { email: `nobody${i}@example.test`, password: 'wrong password here' },
        })
      ).statusCode;
    // Ten failed logins per address; the eleventh from the same /64 (another address) is refused.
    const statuses: number[] = [];
    for (let i = 0; i < 11; i++) statuses.push(await login(`2001:db8:7:7::${i + 1}`, i));
    expect(statuses.slice(0, 10).every((s) => s === 401)).toBe(true);
    expect(statuses[10]).toBe(429);
  });

  it('the anonymous limit uses the same buckets', async () => {
    const anon = await createTestApp({ env: { SVC_ANON_RATE_LIMIT_BURST: '2', SVC_ANON_RATE_LIMIT_RPS: '0.001' } });
    try {
      const get = async (remoteAddress: string) =>
        (await anon.app.inject({ method: 'GET', url: '/api/v1/downloads', remoteAddress })).statusCode;
      expect([await get('2001:db8:9:9::1'), await get('2001:db8:9:9::2'), await get('2001:db8:9:9::3')]).toEqual([
        200, 200, 429,
      ]);
      expect(await get('2001:db8:9:a::1')).toBe(200);
    } finally {
      await anon.close();
    }
  });
});

describe('behind a trusted proxy the client is the one X-Forwarded-For names', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({ env: { ...env, SVC_TRUST_PROXY: '10.0.0.0/8, 127.0.0.1' } });
  });
  afterAll(() => t.close());

  it('clients behind the proxy get a bucket each', async () => {
    const proxy = '10.1.2.3';
    const statuses = [
      await signUpFrom(t, proxy, '198.51.100.1'),
      await signUpFrom(t, proxy, '198.51.100.1'),
      await signUpFrom(t, proxy, '198.51.100.1'),
      // Another client through the same proxy is not held back by the first.
      await signUpFrom(t, proxy, '198.51.100.2'),
      // Its IPv6 clients count per /64 too.
      await signUpFrom(t, proxy, '2001:db8:5:5::1'),
      await signUpFrom(t, proxy, '2001:db8:5:5::2'),
      await signUpFrom(t, proxy, '2001:db8:5:5::3'),
    ];
    expect(statuses).toEqual([201, 201, 429, 201, 201, 201, 429]);
  });

  it('X-Forwarded-For from a peer that is not a trusted proxy is ignored', async () => {
    const stranger = '203.0.113.9';
    const statuses = [
      await signUpFrom(t, stranger, '198.51.100.10'),
      await signUpFrom(t, stranger, '198.51.100.11'),
      // A forged header does not buy a fresh bucket: the peer's is empty.
      await signUpFrom(t, stranger, '198.51.100.12'),
    ];
    expect(statuses).toEqual([201, 201, 429]);
  });
});

describe('SVC_TRUST_PROXY', () => {
  it('refuses what is not an address, a CIDR or a named range, and trusts no proxy by default', async () => {
    const { loadConfig, ConfigError } = await import('../../platform/config.js');
    expect(loadConfig({}, {}).trustProxy).toEqual([]);
    expect(loadConfig({}, { SVC_TRUST_PROXY: 'loopback, 10.0.0.0/8,::1' }).trustProxy).toEqual([
      'loopback',
      '10.0.0.0/8',
      '::1',
    ]);
    expect(() => loadConfig({}, { SVC_TRUST_PROXY: 'true' })).toThrow(ConfigError);
    expect(() => loadConfig({}, { SVC_TRUST_PROXY: '10.0.0.0/99' })).toThrow(/SVC_TRUST_PROXY/);
  });
});

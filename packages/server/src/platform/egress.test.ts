import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Resolve } from '@svc/protocol/egress';
import { checkOutboundUrl, createEgress, EgressRefusedError } from './egress.js';

describe('checkOutboundUrl (the early check)', () => {
  const refusedUrls = [
    'http://[::ffff:127.0.0.1]:8080/metrics',
    'http://[::ffff:7f00:1]/metrics',
    'http://[::127.0.0.1]/',
    'http://[fec0::1]/',
    'http://[64:ff9b::7f00:1]/',
    'http://[2002:7f00:1::]/',
    'http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/',
    'http://127.1/',
    'http://2130706433/',
    'http://0x7f000001/',
    'http://169.254.169.254/latest/meta-data',
    'http://[::]/',
  ];
  it.each(refusedUrls)('refuses %s with a clear 400', async (url) => {
    await expect(checkOutboundUrl(url, { allowPrivate: false, path: '/payload_url' })).rejects.toMatchObject({
      code: 'invalid_request',
      message: expect.stringMatching(/^payload_url must point to a public address: refused to connect to/),
    });
  });

  it('judges every address a name resolves to', async () => {
    const resolve: Resolve = async () => [
      { address: '8.8.8.8', family: 4 },
      { address: '::ffff:10.0.0.1', family: 6 },
    ];
    await expect(
      checkOutboundUrl('https://mixed.example/x', { allowPrivate: false, path: '/delivery_webhook_url', resolve }),
    ).rejects.toThrow(/private \(10\.0\.0\.1 inside an IPv4-mapped/);
    const publicOnly: Resolve = async () => [{ address: '8.8.8.8', family: 4 }];
    await expect(
      checkOutboundUrl('https://public.example/x', { allowPrivate: false, path: '/payload_url', resolve: publicOnly }),
    ).resolves.toBeInstanceOf(URL);
  });
});

describe('the guarded dispatcher (connect time)', () => {
  let server: Server;
  let port = 0;
  let hits = 0;
  beforeAll(async () => {
    server = createServer((req, res) => {
      hits++;
      res.end('secret metrics');
    });
    await new Promise<void>((resolve) => server.listen(0, '::', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('refuses IP literals that embed loopback without sending anything', async () => {
    const egress = createEgress({ allowPrivate: false });
    try {
      const before = hits;
      for (const host of ['127.0.0.1', '[::1]', '[::ffff:127.0.0.1]', '[::ffff:7f00:1]']) {
        const err = await egress.fetch(`http://${host}:${port}/metrics`).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(err).toBeInstanceOf(EgressRefusedError);
        expect((err as Error).message).toMatch(/^refused to connect to .*loopback/);
      }
      expect(hits).toBe(before);
    } finally {
      await egress.close();
    }
  });

  it('DNS rebinding: a name public at check time and loopback at connect time is refused at connect', async () => {
    let calls = 0;
    const rebinding: Resolve = async () =>
      calls++ === 0 ? [{ address: '93.184.216.34', family: 4 }] : [{ address: '127.0.0.1', family: 4 }];
    const egress = createEgress({ allowPrivate: false, resolve: rebinding });
    try {
      const before = hits;
      const url = `http://rebind.example:${port}/metrics`;
      await expect(egress.checkUrl(url, '/payload_url')).resolves.toBeInstanceOf(URL);
      await expect(egress.fetch(url)).rejects.toThrow(
        'refused to connect to rebind.example (127.0.0.1): loopback addresses are not reachable from the platform',
      );
      expect(calls).toBe(2);
      expect(hits).toBe(before);
    } finally {
      await egress.close();
    }
  });

  it('refuses a name when any one of its addresses is private, even if another is public', async () => {
    const egress = createEgress({
      allowPrivate: false,
      resolve: async () => [
        { address: '8.8.8.8', family: 4 },
        { address: '::ffff:127.0.0.1', family: 6 },
      ],
    });
    try {
      const before = hits;
      await expect(egress.fetch(`http://two.example:${port}/`)).rejects.toBeInstanceOf(EgressRefusedError);
      expect(hits).toBe(before);
    } finally {
      await egress.close();
    }
  });

  it('connects to the address its own lookup returned when private egress is allowed (the same path, policy off)', async () => {
    const egress = createEgress({ allowPrivate: true, resolve: async () => [{ address: '127.0.0.1', family: 4 }] });
    try {
      const before = hits;
      const res = await egress.fetch(`http://named.example:${port}/metrics`);
      expect(await res.text()).toBe('secret metrics');
      expect(hits).toBe(before + 1);
    } finally {
      await egress.close();
    }
  });
});

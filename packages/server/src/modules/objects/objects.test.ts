import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer } from '../../../test/harness.js';
import { startTestS3, type TestS3 } from '../../../test/s3-server.js';
import { checkObjectUrl, objectUrl, presignObjectUrl } from '../../platform/objects/presign.js';

type Server = Awaited<ReturnType<typeof startTestServer>>;
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

let s3: TestS3;
beforeAll(async () => {
  s3 = await startTestS3();
});
afterAll(() => s3.close());

describe.each([
  ['a directory', () => ({})],
  ['S3 (s3rver)', () => s3.env],
])('presigned object URLs on %s', (_name, env) => {
  let server: Server;
  beforeAll(async () => {
    server = await startTestServer({ env: env() });
  });
  afterAll(() => server.stop());
  // The server's public URL is its configured one; tests reach it on the port it listens on.
  const local = (url: string) => url.replace(server.ctx.config.publicUrl, server.url);

  it('PUTs an object up to its size limit and GETs it back, with no key', async () => {
    expect(server.ctx.objects.kind).toBe(Object.keys(env()).length > 0 ? 's3' : 'local');
    const body = randomBytes(3 * 1024 * 1024);
    const put = presignObjectUrl(server.ctx, {
      method: 'PUT',
      key: 'outputs/job_1/mesh.ply',
      ttlSeconds: 60,
      maxBytes: body.length,
    });
    const stored = await fetch(local(put), { method: 'PUT', headers: { 'content-type': 'model/x-ply' }, body });
    expect(stored.status).toBe(200);
    expect(await stored.json()).toEqual({ key: 'outputs/job_1/mesh.ply', bytes: body.length });
    const get = presignObjectUrl(server.ctx, { method: 'GET', key: 'outputs/job_1/mesh.ply', ttlSeconds: 60 });
    const res = await fetch(local(get));
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('model/x-ply');
    expect(sha(Buffer.from(await res.arrayBuffer()))).toBe(sha(body));
  });

  it("hands out the store's own presigned URLs on S3 (the SDK's presigner) and the server's on a directory", async () => {
    const body = randomBytes(64 * 1024);
    const s3Store = server.ctx.objects.kind === 's3';
    const put = await objectUrl(server.ctx, { method: 'PUT', key: 'outputs/wrk_1/a.bin', ttlSeconds: 60 });
    const get = await objectUrl(server.ctx, { method: 'GET', key: 'outputs/wrk_1/a.bin', ttlSeconds: 60 });
    const base = s3Store
      ? `${s3.endpoint}/${s3.bucket}/outputs/wrk_1/a.bin?`
      : `${server.ctx.config.publicUrl}/api/v1/objects/outputs%2Fwrk_1%2Fa.bin?`;
    expect(put.startsWith(base) && get.startsWith(base)).toBe(true);
    // S3 (s3rver here) checks its own signatures' expiry; s3rver does not check V4 signatures themselves.
    if (s3Store) expect(new URL(get).searchParams.get('X-Amz-Expires')).toBe('60');
    const reach = (url: string) => (s3Store ? url : local(url));
    expect((await fetch(reach(put), { method: 'PUT', body })).status).toBe(200);
    const res = await fetch(reach(get));
    expect(res.status).toBe(200);
    expect(sha(Buffer.from(await res.arrayBuffer()))).toBe(sha(body));
  });

  it('refuses a body over the limit, storing nothing', async () => {
    const put = presignObjectUrl(server.ctx, {
      method: 'PUT',
      key: 'outputs/job_2/big.bin',
      ttlSeconds: 60,
      maxBytes: 10,
    });
    const res = await fetch(local(put), { method: 'PUT', body: Buffer.alloc(11) });
    expect(res.status).toBe(413);
    expect(((await res.json()) as { error: string }).error).toBe('payload_too_large');
    expect(await server.ctx.objects.stat('outputs/job_2/big.bin')).toBeUndefined();
  });

  it('answers 403 to an expired, altered or wrong-method URL, and 404 to a missing object', async () => {
    await server.ctx.objects.put('inputs/a.jpg', Buffer.from('jpeg'));
    const get = presignObjectUrl(server.ctx, { method: 'GET', key: 'inputs/a.jpg', ttlSeconds: 60 });
    const expired = presignObjectUrl(server.ctx, {
      method: 'GET',
      key: 'inputs/a.jpg',
      ttlSeconds: 60,
      now: Date.now() - 3_600_000,
    });
    const cases: [string, string, number, string][] = [
      [local(get), 'GET', 200, ''],
      [local(expired), 'GET', 403, 'this object URL has expired'],
      [
        local(get).replace('inputs%2Fa.jpg', 'inputs%2Fb.jpg'),
        'GET',
        403,
        'this object URL is not valid for GET (missing, altered or for another object)',
      ],
      [
        local(get).replace(/expires=\d+/, 'expires=9999999999'),
        'GET',
        403,
        'this object URL is not valid for GET (missing, altered or for another object)',
      ],
      [local(get), 'PUT', 403, 'this object URL is not valid for PUT (missing, altered or for another object)'],
      [
        `${server.url}/api/v1/objects/inputs%2Fa.jpg`,
        'GET',
        403,
        'this object URL is not valid for GET (missing, altered or for another object)',
      ],
      [
        local(presignObjectUrl(server.ctx, { method: 'GET', key: 'inputs/none.jpg', ttlSeconds: 60 })),
        'GET',
        404,
        'object not found',
      ],
    ];
    for (const [url, method, status, message] of cases) {
      const res = await fetch(url, { method, ...(method === 'PUT' ? { body: 'x' } : {}) });
      expect(`${method} ${res.status}`).toBe(`${method} ${status}`);
      if (message) expect(((await res.json()) as { message: string }).message).toBe(message);
      else await res.arrayBuffer();
    }
  });
});

describe('presigned object URL signatures', () => {
  const ctx = { secrets: { sessionSecret: Buffer.alloc(32, 1) }, config: { publicUrl: 'https://svc.example' } };
  it('bind the method, the key, the expiry and the size limit', () => {
    expect(() => presignObjectUrl(ctx, { method: 'PUT', key: 'a/../b.bin', ttlSeconds: 10 })).toThrow(
      'invalid object key',
    );
    const url = new URL(
      presignObjectUrl(ctx, { method: 'PUT', key: 'a/b.bin', ttlSeconds: 10, maxBytes: 5, now: 1_000_000 }),
    );
    expect(url.pathname).toBe('/api/v1/objects/a%2Fb.bin');
    const ok = Object.fromEntries(url.searchParams) as Record<string, string>;
    expect(ok).toMatchObject({ method: 'PUT', expires: '1010', max_bytes: '5' });
    expect(checkObjectUrl(ctx, 'PUT', 'a/../b.bin', ok, 1_000_000)).toEqual({ status: 'invalid' });
    expect(checkObjectUrl(ctx, 'PUT', 'a/b.bin', ok, 1_000_000)).toEqual({ status: 'ok', maxBytes: 5 });
    expect(checkObjectUrl(ctx, 'PUT', 'a/b.bin', { ...ok, max_bytes: '6' }, 1_000_000)).toEqual({ status: 'invalid' });
    expect(checkObjectUrl(ctx, 'GET', 'a/b.bin', { ...ok, method: 'GET' }, 1_000_000)).toEqual({ status: 'invalid' });
    expect(checkObjectUrl(ctx, 'PUT', 'a/b.bin', ok, 1_011_000)).toEqual({ status: 'expired' });
  });
});

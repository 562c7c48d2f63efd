import { createHash, randomBytes } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Upload } from 'tus-js-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, signUp, startTestServer, type TestBuyer } from '../../../test/harness.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const BIG = 200 * 1024 * 1024;

/** Writes `bytes` pseudo-random bytes to `path` and returns their SHA-256, never holding the file in memory. */
async function generate(path: string, bytes: number): Promise<string> {
  const hash = createHash('sha256');
  const out = createWriteStream(path);
  const block = randomBytes(1024 * 1024);
  for (let written = 0; written < bytes; written += block.length) {
    // Each MiB differs (its index in the first bytes), so a misplaced chunk changes the hash.
    block.writeUInt32BE(written / block.length, 0);
    const piece = block.subarray(0, Math.min(block.length, bytes - written));
    hash.update(piece);
    if (!out.write(piece)) await new Promise<void>((r) => out.once('drain', () => r()));
  }
  await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
  return hash.digest('hex');
}

describe('capture-set uploads through tus', () => {
  let server: Awaited<ReturnType<typeof startTestServer>>;
  let buyer: TestBuyer;
  let dir: string;
  const api = async (method: string, path: string, body?: unknown, key = buyer.apiKey) => {
    const res = await fetch(`${server.url}${path}`, {
      method,
      headers: { ...bearer(key), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, json: (await res.json()) as Json };
  };
  const upload = (input: unknown, options: Record<string, unknown>) =>
    new Upload(input as Buffer, { headers: bearer(buyer.apiKey), retryDelays: [], ...options });

  beforeAll(async () => {
    server = await startTestServer();
    buyer = await signUp(server.app);
    dir = await mkdtemp(join(tmpdir(), 'svc-capture-'));
  });
  afterAll(async () => {
    await server.stop();
    await rm(dir, { recursive: true, force: true });
  });

  async function newSet(files: { path: string; bytes: number; sha256: string }[]) {
    const site = (await api('POST', '/api/v1/sites', { name: 'Tower' })).json;
    const epoch = (await api('POST', `/api/v1/sites/${site.id}/epochs`, { label: 'e1' })).json;
    const res = await api('POST', '/api/v1/capture-sets', {
      site_epoch_id: epoch.id,
      manifest: { version: '1', files },
    });
    expect(res.status).toBe(201);
    return String(res.json.capture_set.id);
  }

  it('uploads a 200 MB file, cut at about half, resumed from its offset, then completes with the hash verified', async () => {
    const bigPath = join(dir, 'scan.bin');
    const bigSha = await generate(bigPath, BIG);
    const small = Buffer.from('capture notes\n');
    const smallSha = createHash('sha256').update(small).digest('hex');
    const id = await newSet([
      { path: 'lidar/scan.bin', bytes: BIG, sha256: bigSha },
      { path: 'notes.txt', bytes: small.length, sha256: smallSha },
    ]);
    const endpoint = `${server.url}/api/v1/capture-sets/${id}/uploads`;

    // First attempt: aborted once about half has been sent.
    let uploadUrl: string | null = null;
    await new Promise<void>((resolve, reject) => {
      const first = upload(createReadStream(bigPath), {
        endpoint,
        metadata: { path: 'lidar/scan.bin' },
        chunkSize: 8 * 1024 * 1024,
        onProgress: (sent: number) => {
          if (sent >= BIG / 2 && first.url) {
            uploadUrl = first.url;
            void first.abort().then(resolve, reject);
          }
        },
        onError: reject,
        onSuccess: () => reject(new Error('the first attempt was meant to be cut')),
      });
      first.start();
    });
    expect(uploadUrl).toMatch(new RegExp(`/api/v1/capture-sets/${id}/uploads/${id}-[0-9a-f]{32}$`));
    // The cut PATCH may still be writing what reached the server: wait until its offset settles.
    const headOf = () =>
      fetch(String(uploadUrl), { method: 'HEAD', headers: { ...bearer(buyer.apiKey), 'tus-resumable': '1.0.0' } });
    let offset = -1;
    for (let i = 0; i < 100; i += 1) {
      const head = await headOf();
      expect(head.status).toBe(200);
      expect(head.headers.get('upload-length')).toBe(String(BIG));
      const now = Number(head.headers.get('upload-offset'));
      if (now === offset) break;
      offset = now;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(offset).toBeGreaterThanOrEqual(BIG / 2 - 8 * 1024 * 1024);
    expect(offset).toBeLessThan(BIG);
    // GET of the set shows the bytes received so far, and the first byte made it uploading.
    let mid = await api('GET', `/api/v1/capture-sets/${id}`);
    for (let i = 0; i < 50 && mid.json.files[0].bytes_received !== offset; i += 1) {
      await new Promise((r) => setTimeout(r, 100));
      mid = await api('GET', `/api/v1/capture-sets/${id}`);
    }
    expect(mid.json.capture_set.status).toBe('uploading');
    expect(mid.json.files.map((f: Json) => [f.path, f.bytes_received])).toEqual([
      ['lidar/scan.bin', offset],
      ['notes.txt', 0],
    ]);

    let resumedFrom = -1;
    await new Promise<void>((resolve, reject) => {
      const second = upload(createReadStream(bigPath), {
        endpoint,
        uploadUrl,
        metadata: { path: 'lidar/scan.bin' },
        chunkSize: 64 * 1024 * 1024,
        onProgress: (sent: number) => {
          if (resumedFrom < 0) resumedFrom = sent;
        },
        onError: reject,
        onSuccess: () => resolve(),
      });
      second.start();
    });
    expect(resumedFrom).toBeGreaterThanOrEqual(offset);
    await new Promise<void>((resolve, reject) =>
      upload(small, { endpoint, metadata: { path: 'notes.txt' }, onError: reject, onSuccess: () => resolve() }).start(),
    );

    const before = await api('GET', `/api/v1/capture-sets/${id}`);
    expect(before.json.files.map((f: Json) => [f.path, f.bytes_received, f.verification])).toEqual([
      ['lidar/scan.bin', BIG, 'pending'],
      ['notes.txt', small.length, 'pending'],
    ]);
    const done = await api('POST', `/api/v1/capture-sets/${id}/complete`, {});
    expect(done.status).toBe(200);
    expect(done.json.capture_set).toMatchObject({ status: 'ready', failure_reason: null });
    expect(done.json.capture_set.completed_at).not.toBeNull();
    expect(done.json.files.map((f: Json) => f.verification)).toEqual(['verified', 'verified']);
    const graph = await api('GET', `/api/v1/jobs/${id}/evidence`);
    expect(graph.json.events.map((e: Json) => e.event_type)).toEqual([
      'capture_set.created',
      'capture_set.uploading',
      'capture_set.file_verified',
      'capture_set.file_verified',
      'capture_set.completed',
    ]);
    expect(graph.json.events[2].metadata).toEqual({ path: 'lidar/scan.bin', bytes: BIG, sha256: bigSha });
  }, 240_000);

  it('refuses an upload of a path not in the manifest, of another size, or without a path, in the API error shape', async () => {
    const id = await newSet([{ path: 'a.txt', bytes: 3, sha256: createHash('sha256').update('abc').digest('hex') }]);
    const create = (headers: Record<string, string>) =>
      fetch(`${server.url}/api/v1/capture-sets/${id}/uploads`, {
        method: 'POST',
        headers: { ...bearer(buyer.apiKey), 'tus-resumable': '1.0.0', ...headers },
      });
    const b64 = (s: string) => Buffer.from(s).toString('base64');
    const notListed = await create({ 'upload-length': '3', 'upload-metadata': `path ${b64('b.txt')}` });
    expect(notListed.status).toBe(400);
    expect(await notListed.json()).toEqual({
      code: 400,
      error: 'invalid_request',
      message: '"b.txt" is not a path in the capture set\'s manifest',
    });
    const wrongSize = await create({ 'upload-length': '4', 'upload-metadata': `path ${b64('a.txt')}` });
    expect(await wrongSize.json()).toMatchObject({
      code: 400,
      message: "Upload-Length 4 differs from the manifest's 3 bytes for a.txt",
    });
    const noPath = await create({ 'upload-length': '3' });
    expect(noPath.status).toBe(400);
    const noTus = await fetch(`${server.url}/api/v1/capture-sets/${id}/uploads`, {
      method: 'POST',
      headers: { ...bearer(buyer.apiKey), 'upload-length': '3' },
    });
    expect(noTus.status).toBe(400);
    expect(await noTus.json()).toEqual({ code: 400, error: 'invalid_request', message: 'Tus-Resumable Required' });
    // Garbage a client can send is a quick 4xx in the API's shape, never a hang or a 500.
    const json = await fetch(`${server.url}/api/v1/capture-sets/${id}/uploads`, {
      method: 'POST',
      headers: { ...bearer(buyer.apiKey), 'tus-resumable': '1.0.0', 'content-type': 'application/json' },
      body: '{"upload":"x"}',
    });
    expect(json.status).toBe(400);
    const patch = await fetch(`${server.url}/api/v1/capture-sets/${id}/uploads/${id}-${'0'.repeat(32)}`, {
      method: 'PATCH',
      headers: {
        ...bearer(buyer.apiKey),
        'tus-resumable': '1.0.0',
        'content-type': 'application/json',
        'upload-offset': '0',
      },
      body: '{}',
    });
    expect(patch.status).toBeGreaterThanOrEqual(400);
    expect(patch.status).toBeLessThan(500);
    expect(((await patch.json()) as Json).error).toEqual(expect.any(String));
    // A wrong file completes to failed, naming it.
    await new Promise<void>((resolve, reject) =>
      upload(Buffer.from('abd'), {
        endpoint: `${server.url}/api/v1/capture-sets/${id}/uploads`,
        metadata: { path: 'a.txt' },
        onError: reject,
        onSuccess: () => resolve(),
      }).start(),
    );
    const done = await api('POST', `/api/v1/capture-sets/${id}/complete`, {});
    expect(done.json.capture_set.status).toBe('failed');
    expect(done.json.capture_set.failure_reason).toBe(
      `1 of 1 files differ from the manifest: a.txt (SHA-256 ${createHash('sha256').update('abd').digest('hex')} differs from the manifest)`,
    );
    expect(done.json.files[0].verification).toBe('hash_mismatch');
    // Uploads are closed once the set has left uploading.
    const late = await create({ 'upload-length': '3', 'upload-metadata': `path ${b64('a.txt')}` });
    expect(late.status).toBe(409);
  });

  it("answers 404 to another organization's key, and to an upload id of another set", async () => {
    const id = await newSet([{ path: 'a.txt', bytes: 3, sha256: createHash('sha256').update('abc').digest('hex') }]);
    const other = await signUp(server.app);
    const res = await fetch(`${server.url}/api/v1/capture-sets/${id}/uploads`, {
      method: 'POST',
      headers: {
        ...bearer(other.apiKey),
        'tus-resumable': '1.0.0',
        'upload-length': '3',
        'upload-metadata': `path ${Buffer.from('a.txt').toString('base64')}`,
      },
    });
    expect(res.status).toBe(404);
    let url = '';
    await new Promise<void>((resolve, reject) => {
      const u = upload(Buffer.from('abc'), {
        endpoint: `${server.url}/api/v1/capture-sets/${id}/uploads`,
        metadata: { path: 'a.txt' },
        onError: reject,
        onSuccess: () => {
          url = String(u.url);
          resolve();
        },
      });
      u.start();
    });
    const second = await newSet([
      { path: 'a.txt', bytes: 3, sha256: createHash('sha256').update('abc').digest('hex') },
    ]);
    const uploadId = url.split('/').pop() ?? '';
    const cross = await fetch(`${server.url}/api/v1/capture-sets/${second}/uploads/${uploadId}`, {
      method: 'HEAD',
      headers: { ...bearer(buyer.apiKey), 'tus-resumable': '1.0.0' },
    });
    expect(cross.status).toBe(404);
  });
});

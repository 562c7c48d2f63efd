import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough, Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestS3, type TestS3 } from '../../../test/s3-server.js';
import type { ObjectStore } from './interface.js';
import { createLocalObjectStore } from './local.js';
import { createS3ObjectStore } from './s3.js';
import { loadConfig } from '../config.js';
import { createObjectStore } from './index.js';

async function drain(stream: Readable | undefined): Promise<Buffer | undefined> {
  if (!stream) return undefined;
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** The same contract over every implementation. */
function contract(name: string, open: () => ObjectStore) {
  describe(`object store: ${name}`, () => {
    it('stores a buffer and a stream, stats, reads and deletes them', async () => {
      const store = open();
      expect(await store.put('a/b/one.txt', Buffer.from('hello'), 'text/plain')).toEqual({ bytes: 5 });
      expect(await store.stat('a/b/one.txt')).toEqual({ bytes: 5, contentType: 'text/plain' });
      expect((await drain(await store.read('a/b/one.txt')))?.toString()).toBe('hello');
      // A 12 MiB stream of unknown length (more than one multipart part on S3).
      const big = randomBytes(12 * 1024 * 1024);
      const put = await store.put(
        'big.bin',
        Readable.from(
          (function* () {
            for (let i = 0; i < big.length; i += 1024 * 1024) yield big.subarray(i, i + 1024 * 1024);
          })(),
        ),
      );
      expect(put.bytes).toBe(big.length);
      expect(await store.stat('big.bin')).toMatchObject({ bytes: big.length });
      const back = await drain(await store.read('big.bin'));
      expect(
        createHash('sha256')
          .update(back ?? Buffer.alloc(0))
          .digest('hex'),
      ).toBe(createHash('sha256').update(big).digest('hex'));
      expect(await store.delete('a/b/one.txt')).toBe(true);
      expect(await store.delete('a/b/one.txt')).toBe(false);
      expect(await store.stat('a/b/one.txt')).toBeUndefined();
      expect(await store.read('a/b/one.txt')).toBeUndefined();
      await store.delete('big.bin');
    });

    it('a stream failing before or while it is written rejects the put and leaves nothing', async () => {
      const store = open();
      // Failed at once: the store is still making the object's directory (issue 40, point 1).
      const early = new PassThrough();
      const first = store.put('failing/early/one.bin', early);
      early.destroy(new Error('this URL takes at most 1 bytes'));
      await expect(first).rejects.toThrow('this URL takes at most 1 bytes');
      // Failed halfway through the bytes.
      const late = new PassThrough();
      const second = store.put('failing/late/two.bin', late);
      late.write(randomBytes(256 * 1024));
      await new Promise((r) => setTimeout(r, 50));
      late.destroy(new Error('the client went away'));
      await expect(second).rejects.toThrow('the client went away');
      expect([await store.stat('failing/early/one.bin'), await store.stat('failing/late/two.bin')]).toEqual([
        undefined,
        undefined,
      ]);
    });

    it('refuses keys that could escape the store', async () => {
      const store = open();
      for (const key of ['../x', '/abs', 'a//b', 'a/./b', 'a b', ''])
        await expect(store.put(key, Buffer.from('x'))).rejects.toThrow(/invalid object key/);
    });
  });
}

let dir: string;
let s3: TestS3;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'svc-objects-'));
  s3 = await startTestS3();
});
afterAll(async () => {
  await s3.close();
  await rm(dir, { recursive: true, force: true });
});

contract('local directory', () => createLocalObjectStore(join(dir, 'objects')));
contract('S3 (s3rver)', () =>
  createS3ObjectStore({
    bucket: s3.bucket,
    endpoint: s3.endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: s3.credentials,
  }),
);

describe('local directory store', () => {
  it('writes into a directory removed behind its back, and leaves no temporary file', async () => {
    const root = join(dir, 'removed');
    const store = createLocalObjectStore(root);
    expect(await store.put('results/one', Buffer.from('first'), 'text/plain')).toEqual({ bytes: 5 });
    // The store remembers it made results/; an operator (or a cleanup) removes it meanwhile.
    await rm(join(root, 'results'), { recursive: true, force: true });
    expect(await store.put('results/two', Buffer.from('second'), 'text/plain')).toEqual({ bytes: 6 });
    expect((await drain(await store.read('results/two')))?.toString()).toBe('second');
    expect((await readdir(join(root, 'results'))).sort()).toEqual(['two', 'two.content-type']);
  });

  it('leaves no partial file of a stream that failed', async () => {
    const root = join(dir, 'partial');
    const store = createLocalObjectStore(root);
    for (const key of ['early/one.bin', 'late/two.bin']) {
      const body = new PassThrough();
      const put = store.put(key, body);
      if (key.startsWith('late')) {
        body.write(randomBytes(256 * 1024));
        await new Promise((r) => setTimeout(r, 50));
      }
      body.destroy(new Error('too large'));
      await expect(put).rejects.toThrow('too large');
    }
    expect([await readdir(join(root, 'early')), await readdir(join(root, 'late'))]).toEqual([[], []]);
  });
});

describe('object store choice', () => {
  it('is the data-dir directory by default and S3 when SVC_S3_BUCKET is set', () => {
    expect(createObjectStore(loadConfig({ 'data-dir': dir }, {})).location).toEqual({
      kind: 'local',
      root: join(dir, 'objects'),
    });
    const config = loadConfig(
      { 'data-dir': dir },
      { SVC_S3_BUCKET: 'svc-test', SVC_S3_ENDPOINT: 'http://127.0.0.1:9000', AWS_REGION: 'eu-west-3' },
    );
    expect(createObjectStore(config).location).toEqual({
      kind: 's3',
      bucket: 'svc-test',
      endpoint: 'http://127.0.0.1:9000',
      region: 'eu-west-3',
      forcePathStyle: true,
    });
    const keyed = loadConfig(
      { 'data-dir': dir },
      { SVC_S3_BUCKET: 'svc-test', AWS_ACCESS_KEY_ID: 'AKID', AWS_SECRET_ACCESS_KEY: 'secret' },
    );
    expect(keyed.s3).toEqual({
      bucket: 'svc-test',
      endpoint: undefined,
      region: 'us-east-1',
      forcePathStyle: false,
      credentials: { accessKeyId: 'AKID', secretAccessKey: 'secret' },
    });
    expect(() => loadConfig({}, { SVC_S3_ENDPOINT: 'http://127.0.0.1:9000' })).toThrow(
      'SVC_S3_ENDPOINT is set but SVC_S3_BUCKET is not',
    );
    expect(() => loadConfig({}, { SVC_S3_BUCKET: 'Bad_Bucket' })).toThrow(
      "SVC_S3_BUCKET must be an S3 bucket name, got 'Bad_Bucket'",
    );
  });
});

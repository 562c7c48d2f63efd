import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
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

  it('writes a small buffer into a known directory before put returns (no thread-pool round trips); a large one as before', async () => {
    const root = join(dir, 'small');
    const store = createLocalObjectStore(root);
    await store.put('results/first', Buffer.from('makes the directory'), 'application/json');
    const pending = store.put('results/two', Buffer.from('{"a":1}'), 'application/json');
    // Already in place, its content type beside it, before the promise is awaited.
    expect(readFileSync(join(root, 'results', 'two'), 'utf8')).toBe('{"a":1}');
    expect(readFileSync(join(root, 'results', 'two.content-type'), 'utf8')).toBe('application/json');
    expect(await pending).toEqual({ bytes: 7 });
    // Written again without a content type, the old one goes.
    await store.put('results/two', Buffer.from('x'));
    expect(await store.stat('results/two')).toEqual({ bytes: 1 });
    const large = store.put('results/large', Buffer.alloc(65 * 1024, 1), 'application/octet-stream');
    expect(existsSync(join(root, 'results', 'large'))).toBe(false);
    expect(await large).toEqual({ bytes: 65 * 1024 });
    expect((await readdir(join(root, 'results'))).sort()).toEqual([
      'first',
      'first.content-type',
      'large',
      'large.content-type',
      'two',
    ]);
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

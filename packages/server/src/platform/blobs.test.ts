import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, createTestStore } from '../../test/harness.js';
import { startTestS3, type TestS3 } from '../../test/s3-server.js';
import { createObjectBlobStore, moveDbBlobsToObjects } from './blobs.js';
import { createLocalObjectStore } from './objects/local.js';
import { createS3ObjectStore } from './objects/s3.js';

const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

describe('blobs in the object store', () => {
  let dir: string;
  let s3: TestS3;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'svc-blobs-'));
    s3 = await startTestS3();
  });
  afterAll(async () => {
    await s3.close();
    await rm(dir, { recursive: true, force: true });
  });

  it.each([
    ['a directory', () => createLocalObjectStore(join(dir, 'objects'))],
    [
      'S3 (s3rver)',
      () =>
        createS3ObjectStore({
          bucket: s3.bucket,
          endpoint: s3.endpoint,
          region: 'us-east-1',
          forcePathStyle: true,
          credentials: s3.credentials,
        }),
    ],
  ])('keeps bytes, content type and hash on %s', async (_name, open) => {
    const blobs = createObjectBlobStore(open());
    const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 1, 2, 3]);
    expect(await blobs.put('files/img_1.png', png, 'image/png')).toEqual({ sha256: sha(png) });
    expect(await blobs.get('files/img_1.png')).toEqual({ bytes: png, contentType: 'image/png', sha256: sha(png) });
    expect(await blobs.within({} as never).get('files/img_1.png')).toMatchObject({ contentType: 'image/png' });
    expect(await blobs.delete('files/img_1.png')).toBe(true);
    expect(await blobs.get('files/img_1.png')).toBeUndefined();
  });

  it('moves the rows of the blobs table out at start-up, deleting them, and again finds nothing to move', async () => {
    const store = await createTestStore();
    const first = await createTestApp({ store });
    const rows: [string, string, Buffer][] = [
      ['results/wrk_old1', 'application/json', Buffer.from('{"text":"old result"}')],
      ['files/old.png', 'image/png', Buffer.from([1, 2, 3, 4])],
      ...Array.from({ length: 60 }, (_, i): [string, string, Buffer] => [
        `results/wrk_bulk${i}`,
        'application/json',
        Buffer.from(`{"n":${i}}`),
      ]),
    ];
    // What an earlier version left in the table.
    for (const [key, type, bytes] of rows)
      await first.ctx.db.query('INSERT INTO blobs (key, content_type, bytes, sha256) VALUES ($1, $2, $3, $4)', [
        key,
        type,
        bytes,
        sha(bytes),
      ]);
    await first.close();

    const second = await createTestApp({ store });
    try {
      const left = await second.ctx.db.query<{ n: number }>('SELECT count(*)::int AS n FROM blobs');
      expect(left.rows[0]?.n).toBe(0);
      expect(await second.ctx.blobs.get('results/wrk_old1')).toEqual({
        bytes: rows[0]?.[2],
        contentType: 'application/json',
        sha256: sha(rows[0]?.[2] ?? Buffer.alloc(0)),
      });
      expect((await second.ctx.blobs.get('files/old.png'))?.contentType).toBe('image/png');
      expect((await second.ctx.blobs.get('results/wrk_bulk59'))?.bytes.toString()).toBe('{"n":59}');
      expect(await moveDbBlobsToObjects(second.ctx.db, second.ctx.objects)).toBe(0);
    } finally {
      await second.close();
      await store.drop();
    }
  }, 120_000);
});

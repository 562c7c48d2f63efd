import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import S3rver from 's3rver';

/**
 * A real S3-compatible server for tests (s3rver, files in a temp directory) on a free loopback
 * port, with one bucket. It speaks S3's REST API with SigV4, multipart uploads included; s3rver
 * has no ListParts, which @tus/s3-store needs to resume, so {@link listParts} adds it.
 */
export interface TestS3 {
  endpoint: string;
  bucket: string;
  /** The variables `svc serve` reads to use it. */
  env: Record<string, string>;
  /** The credentials it accepts (its fixed test pair). */
  credentials: { accessKeyId: string; secretAccessKey: string };
  close(): Promise<void>;
}

export async function startTestS3(bucket = 'svc-test'): Promise<TestS3> {
  const dir = await mkdtemp(join(tmpdir(), 'svc-s3-'));
  const server = new S3rver({
    port: 0,
    address: '127.0.0.1',
    silent: true,
    directory: dir,
    configureBuckets: [{ name: bucket, configs: [] }],
  });
  server.middleware.unshift(listParts(server));
  const address = (await server.run()) as AddressInfo;
  const endpoint = `http://127.0.0.1:${address.port}`;
  // s3rver accepts its fixed test credentials.
  const env = {
    SVC_S3_ENDPOINT: endpoint,
    SVC_S3_BUCKET: bucket,
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: 'S3RVER',
    AWS_SECRET_ACCESS_KEY: 'S3RVER',
  };
  return {
    endpoint,
    bucket,
    env,
    credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
    async close() {
      await server.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** The part of s3rver's Koa context that {@link listParts} reads and writes. */
interface KoaContext {
  method: string;
  path: string;
  query: Record<string, string | string[] | undefined>;
  type: string;
  body: unknown;
}

/**
 * S3's ListParts (`GET /bucket/key?uploadId=X`) over s3rver's files: its filesystem store keeps a
 * multipart upload's parts as `<dir>/<bucket>/.../uploads/<uploadId>/<n>` with `<n>.md5` beside.
 */
function listParts(server: { store: { getResourcePath(bucket: string, key: undefined, resource: string): string } }) {
  return async (ctx: KoaContext, next: () => Promise<void>) => {
    const uploadId = ctx.query.uploadId;
    const [, bucket = '', ...keyParts] = ctx.path.split('/');
    const listing = ctx.method === 'GET' && typeof uploadId === 'string' && ctx.query.partNumber === undefined;
    if (!listing || !/^[A-Za-z0-9._-]+$/.test(uploadId)) return next();
    const uploadDir = `${server.store.getResourcePath(bucket, undefined, 'uploads')}/${uploadId}`;
    const names = await readdir(uploadDir).catch(() => undefined);
    if (!names) return next();
    const numbers = names
      .filter((n) => /^\d+$/.test(n))
      .map(Number)
      .sort((a, b) => a - b);
    const parts = await Promise.all(
      numbers.map(async (n) => {
        const [md5, info] = await Promise.all([readFile(`${uploadDir}/${n}.md5`, 'utf8'), stat(`${uploadDir}/${n}`)]);
        return `<Part><PartNumber>${n}</PartNumber><ETag>&quot;${md5.trim()}&quot;</ETag><Size>${info.size}</Size></Part>`;
      }),
    );
    ctx.type = 'application/xml';
    ctx.body =
      `<?xml version="1.0" encoding="UTF-8"?>\n<ListPartsResult><Bucket>${bucket}</Bucket><Key>${keyParts.join('/')}</Key>` +
      `<UploadId>${uploadId}</UploadId><IsTruncated>false</IsTruncated>${parts.join('')}</ListPartsResult>`;
  };
}

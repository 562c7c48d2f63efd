import { mkdtemp, rm } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import S3rver from 's3rver';

/**
 * A real S3-compatible server for tests (s3rver, files in a temp directory) on a free loopback
 * port, with one bucket. It speaks S3's REST API with SigV4, multipart uploads included, but not
 * ListParts (so @tus/s3-store cannot run against it).
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

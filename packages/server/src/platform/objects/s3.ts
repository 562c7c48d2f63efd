import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutObjectCommand,
  S3Client,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { Readable } from 'node:stream';
import type { S3Config } from '../config.js';
import { assertObjectKey, type ObjectStore } from './interface.js';

/** The S3 client for `config`: credentials from the usual AWS variables (or the default chain). */
export function createS3Client(config: S3Config): S3Client {
  // Plain bodies, not aws-chunked with a checksum trailer (the SDK's default), which S3-compatible
  // servers other than AWS may store framing and all (uploads.ts does the same for tus).
  const options: S3ClientConfig = {
    region: config.region,
    forcePathStyle: config.forcePathStyle,
    requestChecksumCalculation: 'WHEN_REQUIRED',
  };
  if (config.endpoint) options.endpoint = config.endpoint;
  if (config.credentials) options.credentials = config.credentials;
  return new S3Client(options);
}

const isMissing = (err: unknown) => {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
  return e.name === 'NotFound' || e.name === 'NoSuchKey' || e.$metadata?.httpStatusCode === 404;
};

/**
 * Objects in an S3-compatible bucket (AWS S3, MinIO, Ceph, R2...). Streams of unknown length are
 * sent as multipart uploads, so nothing is held whole in memory.
 *
 * @example
 * const objects = createS3ObjectStore({ bucket: 'svc', endpoint: 'http://127.0.0.1:9000', region: 'us-east-1', forcePathStyle: true });
 */
export function createS3ObjectStore(
  config: S3Config,
  client = createS3Client(config),
): ObjectStore & { client: S3Client; bucket: string } {
  const Bucket = config.bucket;
  return {
    kind: 's3',
    location: { kind: 's3', ...config },
    client,
    bucket: Bucket,
    async put(key, body, contentType) {
      assertObjectKey(key);
      let bytes = 0;
      const counted = Buffer.isBuffer(body) ? body : body.on('data', (chunk: Buffer) => (bytes += chunk.length));
      if (Buffer.isBuffer(counted)) bytes = counted.length;
      await new Upload({
        client,
        params: { Bucket, Key: key, Body: counted, ...(contentType ? { ContentType: contentType } : {}) },
      }).done();
      return { bytes };
    },
    async stat(key) {
      assertObjectKey(key);
      try {
        const head = await client.send(new HeadObjectCommand({ Bucket, Key: key }));
        return head.ContentType
          ? { bytes: head.ContentLength ?? 0, contentType: head.ContentType }
          : { bytes: head.ContentLength ?? 0 };
      } catch (err) {
        if (isMissing(err)) return undefined;
        throw err;
      }
    },
    async read(key) {
      assertObjectKey(key);
      try {
        const out = await client.send(new GetObjectCommand({ Bucket, Key: key }));
        return out.Body instanceof Readable ? out.Body : undefined;
      } catch (err) {
        if (isMissing(err)) return undefined;
        throw err;
      }
    },
    async presign(method, key, ttlSeconds) {
      assertObjectKey(key);
      const command =
        method === 'GET' ? new GetObjectCommand({ Bucket, Key: key }) : new PutObjectCommand({ Bucket, Key: key });
      return getSignedUrl(client, command, { expiresIn: ttlSeconds });
    },
    async delete(key) {
      const existed = (await this.stat(key)) !== undefined;
      if (existed) await client.send(new DeleteObjectCommand({ Bucket, Key: key }));
      return existed;
    },
  };
}

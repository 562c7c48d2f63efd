import type { Readable } from 'node:stream';
import type { S3Config } from '../config.js';

/**
 * Large stored files (capture-set uploads and outputs), read and written as streams, never whole in
 * memory. Keys are `/`-separated relative names (`[A-Za-z0-9._~-]` segments).
 * Implementations: a directory in the data dir (objects/local.ts, the default) and S3-compatible
 * object storage (objects/s3.ts) when `SVC_S3_BUCKET` is set.
 */
export interface ObjectStore {
  readonly kind: 'local' | 's3';
  /** Where the objects live, for components that write there with their own client (tus uploads). */
  readonly location: { kind: 'local'; root: string } | ({ kind: 's3' } & S3Config);
  /** Stores `body` at `key`, replacing what was there. */
  put(key: string, body: Readable | Buffer, contentType?: string): Promise<{ bytes: number }>;
  /** The object's size and the content type it was stored with, or undefined when there is none. */
  stat(key: string): Promise<{ bytes: number; contentType?: string } | undefined>;
  /** A stream of the object's bytes, or undefined when there is none. */
  read(key: string): Promise<Readable | undefined>;
  /** Removes the object; true when there was one. */
  delete(key: string): Promise<boolean>;
  /**
   * A URL of the store itself that lets its holder GET or PUT one object for `ttlSeconds` (S3's
   * presigned URLs). Absent when the store has none (a directory): the server then signs its own
   * (presign.ts, served at /api/v1/objects/).
   */
  presign?(method: 'GET' | 'PUT', key: string, ttlSeconds: number): Promise<string>;
}

const KEY = /^[A-Za-z0-9._~-]+(\/[A-Za-z0-9._~-]+)*$/;

/** Throws unless `key` is a safe object key (no `..`, no absolute path, no odd characters). */
export function assertObjectKey(key: string): void {
  if (!KEY.test(key) || key.split('/').some((s) => s === '.' || s === '..') || key.length > 1024)
    throw new Error(`invalid object key ${JSON.stringify(key)}`);
}

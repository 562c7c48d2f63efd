import { createHash } from 'node:crypto';
import type { Queryable } from './db/index.js';

/** Stored bytes: job results, generated images, uploaded knowledge-base documents. */
export interface BlobStore {
  put(key: string, bytes: Buffer, contentType: string): Promise<{ sha256: string }>;
  get(key: string): Promise<{ bytes: Buffer; contentType: string; sha256: string } | undefined>;
  /** Removes a blob; true when there was one. */
  delete(key: string): Promise<boolean>;
  /** The same store inside the caller's transaction: a write commits or rolls back with it. */
  within(tx: Queryable): BlobStore;
}

/**
 * Blobs in the `blobs` table of the store: shared by every instance on one database with no
 * other service to run. An S3-compatible store would implement the same interface.
 */
export function createDbBlobStore(db: Queryable): BlobStore {
  return {
    async put(key, bytes, contentType) {
      const sha256 = createHash('sha256').update(bytes).digest('hex');
      await db.query(
        `INSERT INTO blobs (key, content_type, bytes, sha256) VALUES ($1, $2, $3, $4)
         ON CONFLICT (key) DO UPDATE SET content_type = EXCLUDED.content_type, bytes = EXCLUDED.bytes, sha256 = EXCLUDED.sha256`,
        [key, contentType, bytes, sha256],
      );
      return { sha256 };
    },
    async get(key) {
      const { rows } = await db.query<{ bytes: Uint8Array; content_type: string; sha256: string }>('SELECT bytes, content_type, sha256 FROM blobs WHERE key = $1', [key]);
      const row = rows[0];
      return row ? { bytes: Buffer.from(row.bytes), contentType: row.content_type, sha256: row.sha256 } : undefined;
    },
    async delete(key) {
      const { rowCount } = await db.query('DELETE FROM blobs WHERE key = $1', [key]);
      return rowCount > 0;
    },
    within: (tx) => createDbBlobStore(tx),
  };
}

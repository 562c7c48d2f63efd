import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { Queryable } from './db/index.js';
import type { ObjectStore } from './objects/index.js';

/** Stored bytes: job results, generated images, uploaded knowledge-base documents. */
export interface BlobStore {
  put(key: string, bytes: Buffer, contentType: string): Promise<{ sha256: string }>;
  get(key: string): Promise<{ bytes: Buffer; contentType: string; sha256: string } | undefined>;
  /** Removes a blob; true when there was one. */
  delete(key: string): Promise<boolean>;
  /**
   * The same store for a caller inside a transaction. Objects are not transactional: a write is
   * visible at once and stays if the transaction rolls back; every key is written again by a retry
   * of the same work, so such a leftover is overwritten, never read as another's.
   */
  within(tx: Queryable): BlobStore;
}

const PREFIX = 'blobs/';

/**
 * Blobs as objects under `blobs/` in the object store (a data-dir directory or S3: DESIGN.md
 * section 10, "never database rows"), with their content type; the SHA-256 is computed on read.
 *
 * @example
 * const blobs = createObjectBlobStore(createObjectStore(config));
 */
export function createObjectBlobStore(objects: ObjectStore): BlobStore {
  const store: BlobStore = {
    async put(key, bytes, contentType) {
      await objects.put(PREFIX + key, bytes, contentType);
      return { sha256: createHash('sha256').update(bytes).digest('hex') };
    },
    async get(key) {
      const stat = await objects.stat(PREFIX + key);
      const stream = stat ? await objects.read(PREFIX + key) : undefined;
      if (!stat || !stream) return undefined;
      const chunks: Buffer[] = [];
      for await (const chunk of stream) chunks.push(chunk as Buffer);
      const bytes = Buffer.concat(chunks);
      return {
        bytes,
        contentType: stat.contentType ?? 'application/octet-stream',
        sha256: createHash('sha256').update(bytes).digest('hex'),
      };
    },
    delete: (key) => objects.delete(PREFIX + key),
    within: () => store,
  };
  return store;
}

/**
 * Moves what earlier versions kept in the `blobs` table into the object store, a few rows at a
 * time, deleting each row once its object is written. Run at start-up; idempotent (a row copied
 * twice by two instances starting together is the same object written twice).
 *
 * @returns how many rows were moved
 */
export async function moveDbBlobsToObjects(db: Queryable, objects: ObjectStore, log?: Logger): Promise<number> {
  let moved = 0;
  for (;;) {
    const { rows } = await db.query<{ key: string; content_type: string; bytes: Uint8Array }>(
      'SELECT key, content_type, bytes FROM blobs ORDER BY key LIMIT 50',
    );
    if (rows.length === 0) break;
    for (const row of rows) await objects.put(PREFIX + row.key, Buffer.from(row.bytes), row.content_type);
    await db.query('DELETE FROM blobs WHERE key = ANY($1::text[])', [rows.map((r) => r.key)]);
    moved += rows.length;
  }
  if (moved > 0) log?.info({ moved }, `moved ${moved} blobs from the database to the object store`);
  return moved;
}

import { createHash } from 'node:crypto';
import type { Queryable } from '../../platform/db/index.js';
import type { BlobStore } from '../../platform/blobs.js';
import { findWorkResultInline } from './store.js';

/**
 * Where a work item's result is kept. Up to {@link INLINE_RESULT_MAX_BYTES} it is written into
 * the work item's row by the statement that records the result (`result_inline`), so storing a
 * chat completion costs no object store call: on direct work's hot path that write was, after the
 * receipt's signature check, the costliest single part of a request's CPU (seven thread-pool round
 * trips, or an HTTP PUT on S3). Larger results are objects under `results/<work id>` as before, and
 * so is every result stored before migration 0165. Inline, the result commits or rolls back with
 * its work item; an object is written before the transaction and may outlive a rollback (the next
 * attempt of the same work writes it again).
 */

/** The largest result kept in its work item's row. */
export const INLINE_RESULT_MAX_BYTES = 64 * 1024;

/** The object key of a result kept in the object store. */
export function resultObjectKey(workId: string): string {
  return `results/${workId}`;
}

/** A stored result: its bytes, content type and SHA-256 (hex). */
export interface StoredResult {
  bytes: Buffer;
  contentType: string;
  sha256: string;
}

/**
 * Keeps `bytes` as the result of `workId`: returns them to be written inline by the work item's
 * own statement when they fit, else writes the object and returns null (nothing inline).
 *
 * @example
 * const inline = await keepResult(ctx.blobs.within(tx), work.id, bytes, 'application/json');
 * await storeWorkResult(tx, work.id, { ..., inline });
 */
export async function keepResult(
  blobs: BlobStore,
  workId: string,
  bytes: Buffer,
  contentType: string,
): Promise<Buffer | null> {
  if (bytes.length <= INLINE_RESULT_MAX_BYTES) return bytes;
  await blobs.put(resultObjectKey(workId), bytes, contentType);
  return null;
}

/**
 * The stored result of `workId`, wherever it is kept; undefined when there is none (the work has
 * no result, or its object was removed). `db` reads the row (pass the transaction that wrote it to
 * see an uncommitted result).
 *
 * @example
 * const result = await readWorkResult({ db: ctx.db, blobs: ctx.blobs }, job.work_id);
 */
export async function readWorkResult(
  ctx: { db: Queryable; blobs: BlobStore },
  workId: string,
): Promise<StoredResult | undefined> {
  const row = await findWorkResultInline(ctx.db, workId);
  if (row?.bytes)
    return {
      bytes: row.bytes,
      contentType: row.contentType ?? 'application/octet-stream',
      sha256: createHash('sha256').update(row.bytes).digest('hex'),
    };
  return ctx.blobs.get(resultObjectKey(workId));
}

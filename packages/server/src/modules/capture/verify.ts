import { createHash } from 'node:crypto';
import type { ObjectStore } from '../../platform/objects/interface.js';
import type { CaptureFileRow, Verification } from './store.js';

/** One manifest file checked against what is stored. */
export interface FileCheck {
  path: string;
  verification: Exclude<Verification, 'pending'>;
  bytes_received: number;
  actual_sha256: string | null;
}

/** The object key of an upload's bytes: the tus stores keep each upload under its id, at the top of the store. */
export function uploadKey(uploadId: string): string {
  return uploadId;
}

/** SHA-256 (hex) and length of a stream, read chunk by chunk. */
export async function hashStream(
  stream: AsyncIterable<Buffer | Uint8Array>,
): Promise<{ sha256: string; bytes: number }> {
  const hash = createHash('sha256');
  let bytes = 0;
  for await (const chunk of stream) {
    hash.update(chunk);
    bytes += chunk.length;
  }
  return { sha256: hash.digest('hex'), bytes };
}

/**
 * Checks each file's stored size, then (only when the size matches) its SHA-256 over a stream of
 * the stored bytes, one file at a time so memory stays flat however large the set.
 */
export async function checkFiles(objects: ObjectStore, files: readonly CaptureFileRow[]): Promise<FileCheck[]> {
  const checks: FileCheck[] = [];
  for (const f of files) {
    const key = f.upload_id ? uploadKey(f.upload_id) : undefined;
    const stat = key ? await objects.stat(key) : undefined;
    if (!key || !stat) {
      checks.push({ path: f.path, verification: 'missing', bytes_received: f.bytes_received, actual_sha256: null });
      continue;
    }
    if (stat.bytes !== f.bytes) {
      checks.push({ path: f.path, verification: 'size_mismatch', bytes_received: stat.bytes, actual_sha256: null });
      continue;
    }
    const stream = await objects.read(key);
    const got = stream ? await hashStream(stream) : undefined;
    if (!got) checks.push({ path: f.path, verification: 'missing', bytes_received: 0, actual_sha256: null });
    else
      checks.push({
        path: f.path,
        verification:
          got.sha256 === f.sha256 && got.bytes === f.bytes
            ? 'verified'
            : got.bytes !== f.bytes
              ? 'size_mismatch'
              : 'hash_mismatch',
        bytes_received: got.bytes,
        actual_sha256: got.sha256,
      });
  }
  return checks;
}

/** A failure reason naming the files that differ (the first 20, then a count). */
export function mismatchReason(
  checks: readonly FileCheck[],
  declared: ReadonlyMap<string, { bytes: number }>,
): string | undefined {
  const bad = checks.filter((c) => c.verification !== 'verified');
  if (bad.length === 0) return undefined;
  const describe = (c: FileCheck) => {
    const expected = declared.get(c.path)?.bytes;
    if (c.verification === 'missing') return `${c.path} (missing)`;
    if (c.verification === 'size_mismatch')
      return `${c.path} (${c.bytes_received} bytes, manifest says ${expected ?? '?'})`;
    return `${c.path} (SHA-256 ${c.actual_sha256 ?? '?'} differs from the manifest)`;
  };
  const named = bad.slice(0, 20).map(describe).join(', ');
  const more = bad.length > 20 ? ` and ${bad.length - 20} more` : '';
  return `${bad.length} of ${checks.length} files differ from the manifest: ${named}${more}`;
}

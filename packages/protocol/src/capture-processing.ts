import { Type } from '@sinclair/typebox';
import { manifestPathProblem, MAX_MANIFEST_FILES } from './capture-manifest.js';

/**
 * Kinds 8 (`scene_reconstruction`) and 10 (`data_processing`) on a capture set: what the node
 * receives, what it sends back, and how it is metered (docs/capture-sets.md, "Processing").
 * Pure: shared by the server and the node agent.
 */

/** One input file of the work: a manifest file with a presigned, expiring GET URL. */
export interface CaptureInputFile {
  path: string;
  bytes: number;
  sha256: string;
  url: string;
}

/** `payload` of a kind 8 or 10 work item. */
export interface CaptureWorkPayload {
  capture_set_id: string;
  timeout_seconds: number;
  files: CaptureInputFile[];
  /** When the input URLs stop working (ISO 8601). */
  urls_expire_at: string;
}

/** One output file as the node declares it. */
export interface OutputFile {
  path: string;
  bytes: number;
  sha256: string;
}

/**
 * The output manifest `{files: [{path, bytes, sha256}]}`, files sorted by path. Its exact bytes
 * ({@link outputManifestBytes}) are the work's result: the receipt's `result_hash` is their SHA-256.
 */
export interface OutputManifest {
  files: OutputFile[];
}

/** Where a node PUTs one output (answer of `POST /api/v1/node/work/{work_id}/outputs`). */
export interface OutputUpload {
  path: string;
  url: string;
}

/** The output a kind 8 program writes to say how many scenes it reconstructed: `{"scenes": N}`. */
export const SCENES_FILE = 'scenes.json';

/** Kind 10 meters gigabytes read: 10^9 bytes, a started gigabyte counts whole. */
export const BYTES_PER_GB = 1_000_000_000;

/**
 * The units a kind 10 job is charged for reading `bytes`: started gigabytes (at least 1).
 *
 * @example
 * dataProcessingUnits(200_000_000) // 1
 */
export function dataProcessingUnits(bytes: number): number {
  return Math.max(1, Math.ceil(bytes / BYTES_PER_GB));
}

/** The exact bytes of an output manifest: its files sorted by path, JSON without spaces. */
export function outputManifestBytes(manifest: OutputManifest): Buffer {
  const files = [...manifest.files]
    .sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
    .map((f) => ({ path: f.path, bytes: f.bytes, sha256: f.sha256 }));
  return Buffer.from(JSON.stringify({ files }), 'utf8');
}

/**
 * Reads an output manifest from untrusted JSON: at most 10,000 files, each path a valid manifest
 * path (relative, normalised, no `..`), unique, a non-negative integer size and a hex SHA-256.
 *
 * @example
 * parseOutputManifest({ files: [{ path: 'mesh.ply', bytes: 3, sha256: 'ab...' }] })
 */
export function parseOutputManifest(input: unknown): { manifest: OutputManifest } | { problem: string } {
  if (typeof input !== 'object' || input === null || !Array.isArray((input as { files?: unknown }).files))
    return { problem: 'the output manifest must be an object {files: [{path, bytes, sha256}]}' };
  const list = (input as { files: unknown[] }).files;
  if (list.length > MAX_MANIFEST_FILES)
    return { problem: `the output manifest lists more than ${MAX_MANIFEST_FILES} files` };
  const seen = new Set<string>();
  const files: OutputFile[] = [];
  for (const [i, raw] of list.entries()) {
    const f = raw as Partial<OutputFile> | null;
    if (typeof f !== 'object' || f === null || typeof f.path !== 'string')
      return { problem: `files/${i} must be an object with a path` };
    const why = manifestPathProblem(f.path);
    if (why) return { problem: `files/${i}/path ${why}` };
    if (seen.has(f.path)) return { problem: `files/${i}/path ${f.path} is listed twice` };
    seen.add(f.path);
    if (typeof f.bytes !== 'number' || !Number.isSafeInteger(f.bytes) || f.bytes < 0)
      return { problem: `files/${i}/bytes must be a non-negative integer` };
    if (typeof f.sha256 !== 'string' || !/^[0-9a-f]{64}$/.test(f.sha256))
      return { problem: `files/${i}/sha256 must be 64 lowercase hex characters` };
    files.push({ path: f.path, bytes: f.bytes, sha256: f.sha256 });
  }
  return { manifest: { files: files.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0)) } };
}

/** The body of `POST /api/v1/node/work/{work_id}/outputs` (paths and uniqueness are checked by {@link parseOutputManifest}). */
export const OutputManifestSchema = Type.Object(
  {
    files: Type.Array(
      Type.Object(
        {
          path: Type.String({ minLength: 1, maxLength: 1024 }),
          bytes: Type.Integer({ minimum: 0, maximum: 2 ** 53 - 1 }),
          sha256: Type.String({ pattern: '^[0-9a-f]{64}$' }),
        },
        { additionalProperties: false },
      ),
      { maxItems: MAX_MANIFEST_FILES },
    ),
  },
  { $id: 'OutputManifest', additionalProperties: false },
);

/** Its answer: a presigned PUT URL per output. */
export const OutputUploadsSchema = Type.Object(
  {
    uploads: Type.Array(Type.Object({ path: Type.String(), url: Type.String() })),
    expires_at: Type.String({ format: 'date-time' }),
  },
  { $id: 'OutputUploads' },
);

import { createHash } from 'node:crypto';
import {
  dataProcessingUnits,
  MAX_MANIFEST_FILES,
  parseOutputManifest,
  SCENES_FILE,
  type CaptureWorkPayload,
  type OutputManifest,
  type OutputUpload,
} from '@svc/protocol';
import type { PlatformServices } from '../../platform/services.js';
import type { Queryable } from '../../platform/db/index.js';
import { ApiError } from '../../platform/errors.js';
import type { ObjectStore } from '../../platform/objects/interface.js';
import { objectUrl } from '../../platform/objects/presign.js';
import type { PlatformSecrets } from '../../platform/secrets.js';
import { closeRun, recordEvents } from '../evidence/recorder.js';
import { refusal } from './states.js';
import * as store from './store.js';
import { hashStream, uploadKey } from './verify.js';

/**
 * Capture sets processed by kind 8 (`scene_reconstruction`) and kind 10 (`data_processing`) jobs
 * (docs/capture-sets.md, "Processing"). The jobs, scheduler and receipts modules call these at
 * their moments (submission, assignment, outputs, receipt, failure); this module never calls them.
 */

/** The job kinds that process a capture set. */
export const CAPTURE_JOB_KINDS: readonly number[] = [8, 10];

export const isCaptureKind = (kind: number) => CAPTURE_JOB_KINDS.includes(kind);

/** Presigned URLs outlive the work's time limit by this much (downloads may start late in a lease). */
const URL_MARGIN_SECONDS = 3600;

/**
 * Submission of a kind 8 or 10 job, in its transaction: the set must be the organization's (404)
 * and `ready` (409 naming both states); it moves to `processing`, held by `jobId`.
 */
export async function takeForJob(
  tx: Queryable,
  orgId: string,
  captureSetId: string,
  job: { id: string; kind: number },
): Promise<store.CaptureSetRow> {
  const set = await store.lockCaptureSet(tx, orgId, captureSetId);
  if (!set) throw new ApiError('not_found', `capture set ${captureSetId} not found`);
  if (set.status !== 'ready')
    throw new ApiError(
      'conflict',
      `capture set ${captureSetId} is ${set.status}, not ready: ${refusal(set.status, 'processing') ?? `it cannot move from ${set.status} to processing`}`,
    );
  await store.moveCaptureSet(tx, set.id, ['ready'], 'processing');
  await store.setProcessingJob(tx, set.id, job.id);
  await recordEvents(tx, set.id, [
    {
      type: 'capture_set.processing',
      summary: `job ${job.id} (kind ${job.kind}) takes the capture set`,
      metadata: { job_id: job.id, kind: job.kind },
      causedBy: ['capture_set.completed'],
    },
  ]);
  return set;
}

/** A node took the job: recorded in the set's evidence, in the claim's transaction. */
export async function noteJobAssigned(
  tx: Queryable,
  captureSetId: string,
  assignment: { job_id: string; node_id: string; work_id: string },
): Promise<void> {
  await recordEvents(tx, captureSetId, [
    {
      type: 'capture_set.job_assigned',
      summary: `job ${assignment.job_id} assigned to ${assignment.node_id}`,
      metadata: assignment,
      causedBy: ['capture_set.processing'],
    },
  ]);
}

/**
 * The payload of a kind 8 or 10 work item: every manifest file with a presigned, expiring GET
 * URL (the object store's own on S3, the server's on a directory).
 */
export async function captureWorkPayload(
  ctx: Pick<PlatformServices, 'objects' | 'secrets' | 'config'>,
  db: Queryable,
  captureSetId: string,
  timeoutSeconds: number,
): Promise<CaptureWorkPayload> {
  const ttlSeconds = timeoutSeconds + URL_MARGIN_SECONDS;
  const files = await store.filesOf(db, captureSetId);
  return {
    capture_set_id: captureSetId,
    timeout_seconds: timeoutSeconds,
    urls_expire_at: new Date(Date.now() + ttlSeconds * 1000).toISOString(),
    files: await Promise.all(
      files.map(async (f) => ({
        path: f.path,
        bytes: f.bytes,
        sha256: f.sha256,
        url: await objectUrl(ctx, { method: 'GET', key: uploadKey(f.upload_id ?? 'missing'), ttlSeconds }),
      })),
    ),
  };
}

/** Where output `path` of work `workId` is stored (paths are hashed: object keys are a narrower alphabet). */
export function outputKey(workId: string, path: string): string {
  return `capture-outputs/${workId}/${createHash('sha256').update(path).digest('hex').slice(0, 40)}`;
}

/** What a node may declare as the outputs of one capture set: at most `files` files of `bytes` bytes in all. */
export interface OutputLimits {
  files: number;
  bytes: number;
}

/** Outputs may take this many times the set's own bytes and files, plus the allowances below. */
const OUTPUT_PER_INPUT = 2;
const OUTPUT_BYTES_ALLOWANCE = 2 ** 30;
const OUTPUT_FILES_ALLOWANCE = 100;

/**
 * The bounds of a job's declared outputs, from what the job processes: twice the capture set's
 * bytes plus 1 GiB, twice its files plus 100 (and at most the 10,000 files of any manifest).
 * A node is a stranger: it only gets upload URLs (disk on this server) within these.
 *
 * @example
 * outputLimits({ raw_bytes: 5_000_000, total_files: 3 }) // { files: 106, bytes: 1_083_741_824 }
 */
export function outputLimits(set: { raw_bytes: number | string; total_files: number | string }): OutputLimits {
  return {
    files: Math.min(MAX_MANIFEST_FILES, OUTPUT_PER_INPUT * Number(set.total_files) + OUTPUT_FILES_ALLOWANCE),
    bytes: OUTPUT_PER_INPUT * Number(set.raw_bytes) + OUTPUT_BYTES_ALLOWANCE,
  };
}

/** Why `manifest` exceeds `limits` (a message and the JSON pointer it is about), or undefined when it is within. */
export function outputLimitProblem(
  manifest: OutputManifest,
  limits: OutputLimits,
): { path: string; message: string } | undefined {
  if (manifest.files.length > limits.files)
    return {
      path: '/files',
      message: `declares ${manifest.files.length} outputs; this job takes at most ${limits.files}`,
    };
  let total = 0;
  for (const f of manifest.files) {
    total += f.bytes;
    if (f.bytes > limits.bytes || total > limits.bytes)
      return {
        path: '/files',
        message: `declares more than ${limits.bytes} bytes of outputs${f.bytes > limits.bytes ? ` (${f.path} alone is ${f.bytes})` : ''}; this job takes at most ${limits.bytes}`,
      };
  }
  return undefined;
}

/**
 * `POST /api/v1/node/work/{work_id}/outputs`: the node declares its output manifest and gets a
 * presigned PUT URL per file (a server-signed one takes at most the declared size). The
 * declaration must fit the job's {@link outputLimits} (400 otherwise).
 */
export async function outputUploads(
  ctx: Pick<PlatformServices, 'objects' | 'secrets' | 'config' | 'db'>,
  work: { id: string; kind: number; org_id: string; payload: Record<string, unknown> },
  body: unknown,
): Promise<{ uploads: OutputUpload[]; expires_at: string }> {
  if (!isCaptureKind(work.kind))
    throw new ApiError('conflict', `work ${work.id} is kind ${work.kind}; only kinds 8 and 10 upload outputs`);
  const manifest = outputManifestOf(body);
  const setId = String(work.payload.capture_set_id);
  const set = await store.findCaptureSet(ctx.db, work.org_id, setId);
  if (!set) throw new ApiError('conflict', `work ${work.id} has no capture set to process`);
  const problem = outputLimitProblem(manifest, outputLimits(set));
  if (problem)
    throw new ApiError('invalid_request', `the output manifest ${problem.message} (capture set ${setId})`, [problem]);
  const ttlSeconds = URL_MARGIN_SECONDS;
  return {
    expires_at: new Date(Date.now() + ttlSeconds * 1000).toISOString(),
    uploads: await Promise.all(
      manifest.files.map(async (f) => ({
        path: f.path,
        url: await objectUrl(ctx, { method: 'PUT', key: outputKey(work.id, f.path), ttlSeconds, maxBytes: f.bytes }),
      })),
    ),
  };
}

function outputManifestOf(input: unknown): OutputManifest {
  const parsed = parseOutputManifest(input);
  if ('problem' in parsed)
    throw new ApiError('invalid_request', `the output manifest is invalid: ${parsed.problem}`, [
      { path: '/files', message: parsed.problem },
    ]);
  return parsed.manifest;
}

/** One output as found in the object store. */
export interface OutputCheck {
  path: string;
  bytes: number;
  sha256: string;
  verification: 'verified' | 'missing' | 'size_mismatch' | 'hash_mismatch';
}

/** Each output's stored size, then its SHA-256 over a stream (one file at a time). */
export async function checkOutputs(
  objects: ObjectStore,
  workId: string,
  manifest: OutputManifest,
): Promise<OutputCheck[]> {
  const checks: OutputCheck[] = [];
  for (const f of manifest.files) {
    const key = outputKey(workId, f.path);
    const stat = await objects.stat(key);
    const stream = stat && stat.bytes === f.bytes ? await objects.read(key) : undefined;
    const got = stream ? await hashStream(stream) : undefined;
    const verification = !stat
      ? 'missing'
      : stat.bytes !== f.bytes || (got && got.bytes !== f.bytes)
        ? 'size_mismatch'
        : got?.sha256 === f.sha256
          ? 'verified'
          : 'hash_mismatch';
    checks.push({ path: f.path, bytes: f.bytes, sha256: f.sha256, verification });
  }
  return checks;
}

/** What a kind 8 or 10 receipt was checked to: the set it settles and its outputs as stored. */
export interface CaptureReceiptCheck {
  captureSetId: string;
  checks: OutputCheck[];
}

async function scenesOf(objects: ObjectStore, workId: string, check: OutputCheck | undefined): Promise<number> {
  if (!check) return 1;
  if (check.verification !== 'verified' || check.bytes > 64 * 1024)
    throw new ApiError('invalid_request', `${SCENES_FILE} differs from its manifest entry; the scene count is unknown`);
  const stream = await objects.read(outputKey(workId, check.path));
  const chunks: Buffer[] = [];
  if (stream) for await (const chunk of stream) chunks.push(Buffer.from(chunk as Uint8Array));
  let scenes: unknown;
  try {
    scenes = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { scenes?: unknown }).scenes;
  } catch {
    scenes = undefined;
  }
  if (typeof scenes !== 'number' || !Number.isSafeInteger(scenes) || scenes < 1)
    throw new ApiError('invalid_request', `${SCENES_FILE} must be {"scenes": N} with N a positive integer`);
  return scenes;
}

/**
 * Checks the receipt of a kind 8 or 10 job before it is accepted, outside any transaction (it
 * reads every output): the result is the output manifest, every output is hashed as stored,
 * and the metering is what the server can count itself. Kind 10: the started gigabytes of the
 * capture set's files (and `usage.bytes_read`, when the node reports it, is exactly their
 * size). Kind 8: the scenes `scenes.json` names, one when the program wrote none. A receipt
 * metering anything else is refused (400).
 */
export async function checkCaptureReceipt(
  ctx: Pick<PlatformServices, 'objects' | 'db'>,
  input: {
    workId: string;
    kind: number;
    captureSetId: string;
    result: Buffer | undefined;
    meteringUnits: number;
    usage: Record<string, unknown> | null | undefined;
  },
): Promise<CaptureReceiptCheck> {
  if (!input.result) throw new ApiError('conflict', 'deliver the output manifest (the result) before the receipt');
  let json: unknown;
  try {
    json = JSON.parse(input.result.toString('utf8'));
  } catch {
    throw new ApiError('invalid_request', 'the result of a capture-set job must be its output manifest (JSON)');
  }
  const manifest = outputManifestOf(json);
  const checks = await checkOutputs(ctx.objects, input.workId, manifest);
  let expected: number;
  if (input.kind === 10) {
    const { rows } = await ctx.db.query<{ raw_bytes: string | number }>(
      'SELECT raw_bytes FROM capture_sets WHERE id = $1',
      [input.captureSetId],
    );
    const raw = Number(rows[0]?.raw_bytes ?? 0);
    const read = input.usage?.bytes_read;
    if (read !== undefined && read !== raw)
      throw new ApiError(
        'invalid_request',
        `usage.bytes_read is ${String(read)} but the capture set's files hold ${raw} bytes`,
        [{ path: '/usage/bytes_read', message: `must equal ${raw}` }],
      );
    expected = dataProcessingUnits(raw);
  } else {
    expected = await scenesOf(
      ctx.objects,
      input.workId,
      checks.find((c) => c.path === SCENES_FILE),
    );
  }
  if (input.meteringUnits !== expected)
    throw new ApiError(
      'invalid_request',
      `metering_units is ${input.meteringUnits} but this ${input.kind === 10 ? 'data_processing job read' : 'scene_reconstruction job reconstructed'} ${expected} ${input.kind === 10 ? 'GB (started gigabytes of the capture set)' : 'scene(s)'}`,
      [{ path: '/metering_units', message: `must be ${expected}` }],
    );
  return { captureSetId: input.captureSetId, checks };
}

/**
 * The job completed (its receipt is accepted in `tx`): the set moves processing -> verified when
 * every output matches its manifest, else -> failed naming the outputs that differ; the set's
 * evidence run records the outputs and is signed.
 */
export async function finishProcessing(
  tx: Queryable,
  secrets: PlatformSecrets,
  job: { id: string; node_id: string | null; result_hash: string },
  check: CaptureReceiptCheck,
): Promise<void> {
  const set = await store.lockCaptureSetById(tx, check.captureSetId);
  if (!set || set.status !== 'processing' || set.processing_job_id !== job.id) return;
  await store.setOutputs(tx, set.id, JSON.stringify(check.checks));
  const bad = check.checks.filter((c) => c.verification !== 'verified');
  const outputs = {
    job_id: job.id,
    node_id: job.node_id,
    output_manifest_sha256: job.result_hash,
    outputs: check.checks.length,
  };
  if (bad.length === 0) {
    await store.moveCaptureSet(tx, set.id, ['processing'], 'verified');
    await closeRun(
      tx,
      secrets,
      set.id,
      [
        {
          type: 'capture_set.outputs_verified',
          summary: `all ${check.checks.length} outputs of job ${job.id} match their manifest`,
          metadata: {
            ...outputs,
            files: check.checks.map((c) => ({ path: c.path, bytes: c.bytes, sha256: c.sha256 })),
          },
          causedBy: ['capture_set.job_assigned'],
        },
        {
          type: 'capture_set.verified',
          summary: 'processed and verified',
          metadata: { job_id: job.id },
          causedBy: ['capture_set.outputs_verified'],
        },
      ],
      'capture set, verified',
    );
    return;
  }
  const named = bad
    .slice(0, 20)
    .map((c) => `${c.path} (${c.verification})`)
    .join(', ');
  const reason = `${bad.length} of ${check.checks.length} outputs of job ${job.id} differ from their manifest: ${named}${bad.length > 20 ? ` and ${bad.length - 20} more` : ''}`;
  await store.moveCaptureSet(tx, set.id, ['processing'], 'failed', { failure_reason: reason });
  await closeRun(
    tx,
    secrets,
    set.id,
    [
      {
        type: 'capture_set.failed',
        summary: reason,
        metadata: { ...outputs, files: bad.map((c) => ({ path: c.path, verification: c.verification })) },
        causedBy: ['capture_set.job_assigned'],
      },
    ],
    'capture set, failed',
  );
}

/**
 * The job ended without a result (failed or cancelled), in its transaction: the set goes back
 * processing -> ready, so it can be processed again.
 */
export async function releaseFromJob(
  tx: Queryable,
  captureSetId: string,
  job: { id: string; status: string; reason: string },
): Promise<void> {
  const set = await store.lockCaptureSetById(tx, captureSetId);
  if (!set || set.status !== 'processing' || set.processing_job_id !== job.id) return;
  await store.moveCaptureSet(tx, set.id, ['processing'], 'ready');
  await recordEvents(tx, set.id, [
    {
      type: 'capture_set.processing_ended',
      summary: `job ${job.id} ${job.status}: ${job.reason}`.slice(0, 500),
      metadata: { job_id: job.id, status: job.status, reason: job.reason },
      causedBy: ['capture_set.processing'],
    },
  ]);
}

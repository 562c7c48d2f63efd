import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { lstat, mkdir, readdir, readFile, rm } from 'node:fs/promises';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { dirname, join, relative, sep } from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import {
  dataProcessingUnits,
  manifestPathProblem,
  outputManifestBytes,
  OutputUploadsSchema,
  SCENES_FILE,
  type CaptureInputFile,
  type OutputFile,
} from '@svc/protocol';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import { buyerRunner, refuseOomKilled, type BuyerRunner } from './compute-job.js';
import { runContainer, shareTree, writableDir } from './oci-runner.js';
import {
  hostEnv,
  PROCESS_DEFAULT_TIMEOUT_S,
  PROCESS_MAX_TIMEOUT_S,
  runProcess,
  type ProcessResult,
} from './process-runner.js';
import { WorkError, type RunContext, type RunOutput } from './types.js';
import type { WorkItem } from '../wire.js';

/** The outputs call's `uploads` (the protocol's OutputUploads; its `expires_at` is not needed here). */
const checkUploads = TypeCompiler.Compile(OutputUploadsSchema.properties.uploads);

/** The program an operator runs for kind 8 or kind 10 (`svc node --runner 8=CMD`). */
export interface CaptureRunner {
  program: string;
  args: string[];
}

const KIND_NAMES: Record<number, string> = { 8: 'scene_reconstruction', 10: 'data_processing' };

/** Parses the payload of a kind 8 or 10 work item (the server's, but checked: paths land on this disk). */
function inputsOf(payload: Record<string, unknown>): { files: CaptureInputFile[]; captureSetId: string } {
  const files = payload.files;
  if (!Array.isArray(files)) throw new WorkError('payload.files must be an array of capture-set files', false);
  const parsed = files.map((raw, i) => {
    const f = raw as Partial<CaptureInputFile>;
    const why = typeof f.path === 'string' ? manifestPathProblem(f.path) : 'must be a string';
    if (why) throw new WorkError(`payload.files[${i}].path ${why}`, false);
    if (typeof f.url !== 'string' || typeof f.sha256 !== 'string' || typeof f.bytes !== 'number')
      throw new WorkError(`payload.files[${i}] must carry url, bytes and sha256`, false);
    return { path: String(f.path), url: f.url, sha256: f.sha256, bytes: f.bytes };
  });
  return { files: parsed, captureSetId: String(payload.capture_set_id ?? '') };
}

/** Downloads one input to `target`, hashing and counting as it streams; a mismatch names the file. */
async function download(file: CaptureInputFile, target: string, ctx: RunContext): Promise<number> {
  const res = await (ctx.fetch ?? fetch)(file.url, { signal: ctx.signal });
  if (!res.ok || !res.body) {
    await res.body?.cancel();
    throw new WorkError(`input ${file.path}: download answered HTTP ${res.status}`, res.status >= 500);
  }
  const hash = createHash('sha256');
  let bytes = 0;
  const tap = new Transform({
    transform(chunk: Buffer, _enc, done) {
      hash.update(chunk);
      bytes += chunk.length;
      done(null, chunk);
    },
  });
  await mkdir(dirname(target), { recursive: true });
  await pipeline(Readable.fromWeb(res.body as WebReadableStream<Uint8Array>), tap, createWriteStream(target), {
    signal: ctx.signal,
  });
  const sha256 = hash.digest('hex');
  if (bytes !== file.bytes || sha256 !== file.sha256)
    throw new WorkError(
      `input ${file.path}: ${bytes !== file.bytes ? `${bytes} bytes, the manifest says ${file.bytes}` : `SHA-256 ${sha256} differs from the manifest's ${file.sha256}`}`,
      false,
    );
  return bytes;
}

/** Every regular file under `root` with its size and SHA-256, paths `/`-separated; links are refused. */
async function listOutputs(root: string): Promise<OutputFile[]> {
  const out: OutputFile[] = [];
  const walk = async (dir: string): Promise<void> => {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      const full = join(dir, entry.name);
      const path = relative(root, full).split(sep).join('/');
      const info = await lstat(full);
      if (info.isDirectory()) await walk(full);
      else if (info.isFile()) {
        const why = manifestPathProblem(path);
        if (why) throw new WorkError(`output ${path} ${why}`, false);
        const hash = createHash('sha256');
        await pipeline(createReadStream(full), hash);
        out.push({ path, bytes: info.size, sha256: hash.digest('hex') });
      } else throw new WorkError(`output ${path} is not a regular file (links and devices are not uploaded)`, false);
    }
  };
  await walk(root);
  return out;
}

/** PUTs a file to a presigned URL with its exact length (S3 wants a Content-Length, not chunks). */
function putFile(url: string, file: string, bytes: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const send = url.startsWith('https:') ? httpsRequest : httpRequest;
    const req = send(
      url,
      {
        method: 'PUT',
        headers: { 'content-length': String(bytes), 'content-type': 'application/octet-stream' },
        signal,
      },
      (res: IncomingMessage) => {
        res.resume();
        res.on('end', () =>
          (res.statusCode ?? 0) >= 200 && (res.statusCode ?? 0) < 300
            ? resolve()
            : reject(new WorkError(`upload answered HTTP ${res.statusCode ?? 0}`, (res.statusCode ?? 0) >= 500)),
        );
      },
    );
    req.on('error', reject);
    createReadStream(file).on('error', reject).pipe(req);
  });
}

/** Kind 8: the scenes `scenes.json` names (`{"scenes": N}`), one when the program wrote none. */
async function scenesOf(outputDir: string, outputs: readonly OutputFile[]): Promise<number> {
  if (!outputs.some((o) => o.path === SCENES_FILE)) return 1;
  let scenes: unknown;
  try {
    scenes = (JSON.parse(await readFile(join(outputDir, SCENES_FILE), 'utf8')) as { scenes?: unknown }).scenes;
  } catch {
    scenes = undefined;
  }
  if (typeof scenes !== 'number' || !Number.isSafeInteger(scenes) || scenes < 1)
    throw new WorkError(`${SCENES_FILE} must be {"scenes": N} with N a positive integer`, false);
  return scenes;
}

/** One run of the operator's program on the downloaded inputs. */
interface CaptureProgram {
  kind: number;
  runner: CaptureRunner;
  captureSetId: string;
  inputDir: string;
  outputDir: string;
  scratch: string;
  limit: number;
}

/** The host process runner (`--allow-process-runner`): the program sees the host's paths. */
function onHost(ctx: RunContext, p: CaptureProgram): Promise<ProcessResult> {
  return runProcess({
    program: p.runner.program,
    args: [...p.runner.args, p.inputDir, p.outputDir],
    cwd: p.scratch,
    env: {
      ...hostEnv(p.scratch),
      SVC_JOB_KIND: String(p.kind),
      SVC_CAPTURE_SET_ID: p.captureSetId,
      SVC_INPUT_DIR: p.inputDir,
      SVC_OUTPUT_DIR: p.outputDir,
    },
    timeoutMs: Math.min(Math.max(p.limit, 1), PROCESS_MAX_TIMEOUT_S) * 1000,
    signal: ctx.signal,
  });
}

/**
 * The oci runner: the program (a path in the image) runs as `PROGRAM ARGS... /input /output`, the
 * inputs mounted read-only at `/input`, `/output` the one writable directory, the job's limits.
 */
async function inContainer(
  item: WorkItem,
  ctx: RunContext,
  chosen: Extract<BuyerRunner, { runner: 'oci' }>,
  p: CaptureProgram,
): Promise<ProcessResult> {
  await shareTree(p.inputDir, chosen.oci);
  await writableDir(p.outputDir, chosen.oci);
  const result = await runContainer({
    oci: chosen.oci,
    workId: item.work_id,
    image: chosen.image,
    argv: [p.runner.program, ...p.runner.args, '/input', '/output'],
    mounts: [
      { host: p.inputDir, container: '/input', readOnly: true },
      { host: p.outputDir, container: '/output', readOnly: false },
    ],
    env: {
      HOME: '/tmp',
      TMPDIR: '/tmp',
      LANG: 'C.UTF-8',
      SVC_JOB_KIND: String(p.kind),
      SVC_CAPTURE_SET_ID: p.captureSetId,
      SVC_INPUT_DIR: '/input',
      SVC_OUTPUT_DIR: '/output',
    },
    workdir: '/tmp',
    limits: chosen.limits,
    gpu: false,
    network: chosen.network,
    signal: ctx.signal,
  });
  refuseOomKilled(result, chosen.limits);
  return result;
}

/**
 * Kinds 8 `scene_reconstruction` and 10 `data_processing` on a capture set: downloads every file
 * of `payload.files` into `<dataDir>/scratch/<work_id>/input/<path>`, checking each SHA-256 (a
 * mismatch fails the work naming the file), runs the operator's program for the kind as
 * `PROGRAM ARGS... INPUT_DIR OUTPUT_DIR` (no shell, only PATH, HOME, TMPDIR, LANG and SVC_*
 * variables, the job's time limit): in the `oci` runner when the node has it (the program is a
 * path in the image; inputs read-only at `/input`, `/output` writable, the job's `memory_mb`,
 * `cpus`, `pids` and `network`), else on the host only with `--allow-process-runner`. Then declares the files it left in the output directory
 * (`POST .../outputs`) and PUTs each to its presigned URL. The result is the output manifest
 * (its SHA-256 is the receipt's result hash). Metering: kind 10 the started gigabytes read
 * (bytes counted here), kind 8 the scenes of `scenes.json` (1 without one). The scratch
 * directory is removed afterwards.
 *
 * @example
 * const out = await runCaptureJob(item, { ...ctx, captureRunners: new Map([[10, { program: '/usr/bin/my-tool', args: [] }]]) });
 */
export async function runCaptureJob(item: WorkItem, ctx: RunContext): Promise<RunOutput> {
  const kind = item.kind ?? 0;
  const runner = ctx.captureRunners?.get(kind);
  if (!runner)
    throw new WorkError(
      `this node has no program for kind ${kind} (${KIND_NAMES[kind] ?? 'unknown'}): its operator did not start it with --runner ${kind}=CMD`,
      false,
    );
  if (!ctx.signedRequest) throw new WorkError('this agent cannot declare outputs (no control-plane client)', false);
  const chosen = buyerRunner(item.payload, ctx);
  const { files, captureSetId } = inputsOf(item.payload);
  const limit =
    typeof item.payload.timeout_seconds === 'number' ? item.payload.timeout_seconds : PROCESS_DEFAULT_TIMEOUT_S;
  const scratch = join(ctx.dataDir, 'scratch', item.work_id);
  const inputDir = join(scratch, 'input');
  const outputDir = join(scratch, 'output');
  await rm(scratch, { recursive: true, force: true });
  await mkdir(outputDir, { recursive: true, mode: 0o700 });
  await mkdir(inputDir, { recursive: true, mode: 0o700 });
  try {
    let bytesRead = 0;
    for (const f of files) bytesRead += await download(f, join(inputDir, ...f.path.split('/')), ctx);
    const program = { kind, runner, captureSetId, inputDir, outputDir, scratch, limit };
    const result = chosen.runner === 'oci' ? await inContainer(item, ctx, chosen, program) : await onHost(ctx, program);
    if (result.timed_out) throw new WorkError(`the kind ${kind} program passed its time limit of ${limit} s`, false);
    if (result.exit_code !== 0)
      throw new WorkError(
        `the kind ${kind} program exited with ${result.exit_code ?? result.signal ?? '?'}: ${result.stderr.trim().slice(-500)}`,
        false,
      );
    const outputs = await listOutputs(outputDir);
    const units = kind === 10 ? dataProcessingUnits(bytesRead) : await scenesOf(outputDir, outputs);
    const answer = await ctx.signedRequest('POST', `/api/v1/node/work/${item.work_id}/outputs`, { files: outputs });
    const uploads =
      typeof answer === 'object' && answer !== null ? (answer as { uploads?: unknown }).uploads : undefined;
    if (!checkUploads.Check(uploads))
      throw new WorkError('the server answered the outputs call without a list of upload URLs (OutputUploads)', true);
    for (const upload of uploads) {
      const file = outputs.find((o) => o.path === upload.path);
      if (file) await putFile(upload.url, join(outputDir, ...file.path.split('/')), file.bytes, ctx.signal);
    }
    return {
      bytes: outputManifestBytes({ files: outputs }),
      encoding: 'utf8',
      content_type: 'application/json',
      metering_units: units,
      usage: { bytes_read: bytesRead, outputs: outputs.length, wall_ms: result.duration_ms },
      engine: `runner:${kind}`,
      exit_code: 0,
      runner: chosen.runner,
      ...(chosen.runner === 'oci' ? { image: chosen.image } : {}),
    };
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

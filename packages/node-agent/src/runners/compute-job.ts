import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { WorkItem } from '../wire.js';
import {
  listOutputFiles,
  runContainer,
  writableDir,
  type ContainerLimits,
  type ContainerResult,
  type OciConfig,
} from './oci-runner.js';
import { PROCESS_DEFAULT_TIMEOUT_S, PROCESS_MAX_TIMEOUT_S, runProcessJob } from './process-runner.js';
import { jsonOutput, stringList, WorkError, type RunContext, type RunOutput } from './types.js';

export const NO_RUNNER =
  'this node runs no buyer code (kinds 5, 6, 8 and 10, the kind 9 capsule): its operator loaded no image for the oci runner (--image) and did not start it with --allow-process-runner';
export const NO_NETWORK =
  'the job asks for network egress and this node grants none (its operator did not start it with --allow-job-network)';
/** The most processes a container may hold; a job's `pids` is capped here. */
export const CONTAINER_MAX_PIDS = 4096;
const DEFAULT_MEMORY_MB = 512;
const DEFAULT_PIDS = 256;

function positive(value: unknown, field: string): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0)
    throw new WorkError(`payload.${field} must be a positive number`, false);
  return value;
}

/**
 * The container's limits: the job's `memory_mb`, `cpus`, `pids` and `timeout_seconds`, each
 * within the node's ceilings (defaults 512 MB, 1 CPU, 256 processes, 300 s).
 *
 * @example
 * containerLimits({ memory_mb: 64 }, oci); // { memory_mb: 64, cpus: 1, pids: 256, timeout_s: 300 }
 */
export function containerLimits(payload: Record<string, unknown>, oci: OciConfig): ContainerLimits {
  const memory = positive(payload.memory_mb, 'memory_mb') ?? Math.min(DEFAULT_MEMORY_MB, oci.maxMemoryMb);
  const cpus = positive(payload.cpus, 'cpus') ?? Math.min(1, oci.maxCpus);
  const pids = positive(payload.pids, 'pids') ?? DEFAULT_PIDS;
  const timeout = positive(payload.timeout_seconds, 'timeout_seconds') ?? PROCESS_DEFAULT_TIMEOUT_S;
  return {
    memory_mb: Math.max(6, Math.floor(Math.min(memory, oci.maxMemoryMb))),
    cpus: Math.round(Math.min(cpus, oci.maxCpus) * 100) / 100,
    pids: Math.max(8, Math.floor(Math.min(pids, CONTAINER_MAX_PIDS))),
    timeout_s: Math.min(timeout, PROCESS_MAX_TIMEOUT_S),
  };
}

/**
 * The image a job runs in (DESIGN.md section 8): the job's `image` when the node holds it, else the
 * node's default (the first image it loaded), else the platform's `default_runner_image`. A job
 * naming an image the node does not hold fails, saying which images it holds.
 *
 * @example
 * chooseImage({ image: 'localhost/busybox:1' }, oci); // 'localhost/busybox:1'
 */
export function chooseImage(payload: Record<string, unknown>, oci: OciConfig): string {
  const asked = payload.image;
  if (asked !== undefined && asked !== null) {
    if (typeof asked !== 'string') throw new WorkError('payload.image must be an image reference', false);
    const held = oci.images.find((ref) => ref === asked || ref === `localhost/${asked}`);
    if (held === undefined)
      throw new WorkError(
        `image ${asked} is not on this node (it holds ${oci.images.join(', ') || 'no image'}); the job needs a node holding it`,
        false,
      );
    return held;
  }
  const image = oci.images[0] ?? oci.defaultImage;
  if (image === undefined) throw new WorkError('this node holds no image for the oci runner', false);
  return image;
}

/**
 * Fails the work when the kernel OOM-killed the container, naming the limit it passed.
 *
 * @example
 * refuseOomKilled(result, limits); // throws WorkError('the container was killed by the OOM killer ...')
 */
export function refuseOomKilled(result: ContainerResult, limits: ContainerLimits): void {
  if (result.oom_killed)
    throw new WorkError(
      `the container was killed by the OOM killer (SIGKILL, exit 137): it passed its memory limit of ${limits.memory_mb} MB (stderr: ${result.stderr.trim().slice(-300)})`,
      false,
    );
}

/**
 * Whether the job's container gets a network: `payload.network` is `"none"` (the default) or
 * `"egress"`, which only a node whose operator allows it grants (else the job fails saying so;
 * matching sends such jobs only to nodes declaring `network:egress`).
 *
 * @example
 * networkGranted({ network: 'egress' }, { ...oci, allowNetwork: true }); // true
 */
export function networkGranted(payload: Record<string, unknown>, oci: OciConfig): boolean {
  const asked = payload.network;
  if (asked === undefined || asked === null || asked === 'none') return false;
  if (asked !== 'egress') throw new WorkError("payload.network must be 'none' or 'egress'", false);
  if (oci.allowNetwork !== true) throw new WorkError(NO_NETWORK, false);
  return true;
}

/** Where buyer code runs: a container (image, limits, network decided) or the host process runner. */
export type BuyerRunner =
  { runner: 'oci'; oci: OciConfig; image: string; limits: ContainerLimits; network: boolean } | { runner: 'process' };

/**
 * The runner for a job's buyer code (DESIGN.md section 8): the `oci` runner when the node has it
 * (unless the job asks for `runner: "process"` on a node allowing it), else the host `process`
 * runner only when the operator allowed it (`--allow-process-runner`), else {@link NO_RUNNER}.
 *
 * @example
 * const r = buyerRunner(item.payload, ctx); // { runner: 'oci', image: 'localhost/busybox:1', ... }
 */
export function buyerRunner(payload: Record<string, unknown>, ctx: RunContext): BuyerRunner {
  const oci = ctx.oci;
  if (oci === undefined || (payload.runner === 'process' && ctx.allowProcessRunner)) {
    if (!ctx.allowProcessRunner) throw new WorkError(NO_RUNNER, false);
    return { runner: 'process' };
  }
  return {
    runner: 'oci',
    oci,
    image: chooseImage(payload, oci),
    limits: containerLimits(payload, oci),
    network: networkGranted(payload, oci),
  };
}

/**
 * Kinds 5 `cpu_compute`, 6 `gpu_compute` and 7: buyer code. With images loaded (`svc node
 * --image`), `payload.runner_args` runs as the container's command (argv, no shell unless the
 * job names one: `["sh", "-c", "..."]` in a busybox image) in the `oci` runner: no network,
 * read-only root, a tmpfs `/tmp`, `/output` the one writable directory (its files are listed in
 * the result), the job's limits within the node's ceilings; kind 6 gets the GPUs when podman has
 * their CDI spec. A container the kernel OOM-killed fails the job, saying so. Without images, the
 * host `process` runner when the operator allowed it (`--allow-process-runner`), also when the
 * job asks for it (`payload.runner: "process"`). The output names the runner and the image.
 *
 * @example
 * const out = await runComputeJob(item, { ...ctx, oci });
 */
export async function runComputeJob(item: WorkItem, ctx: RunContext): Promise<RunOutput> {
  const chosen = buyerRunner(item.payload, ctx);
  if (chosen.runner === 'process') return runProcessJob(item, ctx);
  const { oci, image, limits } = chosen;
  const argv = stringList(item.payload.runner_args, 'runner_args');
  if (argv.some((arg) => arg.includes('\0')))
    throw new WorkError('payload.runner_args must hold no NUL characters', false);
  const scratch = join(ctx.dataDir, 'scratch', item.work_id);
  const output = join(scratch, 'output');
  await rm(scratch, { recursive: true, force: true });
  await mkdir(scratch, { recursive: true, mode: 0o711 });
  try {
    await writableDir(output, oci);
    const result = await runContainer({
      oci,
      workId: item.work_id,
      image,
      argv,
      mounts: [{ host: output, container: '/output', readOnly: false }],
      env: { HOME: '/tmp', TMPDIR: '/tmp', LANG: 'C.UTF-8', SVC_OUTPUT_DIR: '/output' },
      workdir: '/tmp',
      limits,
      gpu: (item.kind === 6 || item.kind === 7) && oci.probe.gpu,
      network: chosen.network,
      signal: ctx.signal,
    });
    refuseOomKilled(result, limits);
    const outputs = await listOutputFiles(output);
    const seconds = Math.ceil(result.duration_ms / 1000);
    const { oom_killed: _oom, ...rest } = result;
    return {
      ...jsonOutput(
        { ...rest, runner: 'oci', image, limits, outputs },
        {
          metering_units: seconds,
          usage: { wall_ms: result.duration_ms },
          engine: 'oci',
          ...(result.exit_code === null ? {} : { exit_code: result.exit_code }),
        },
      ),
      runner: 'oci',
      image,
    };
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

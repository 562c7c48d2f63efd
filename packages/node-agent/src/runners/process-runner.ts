import { spawn } from 'node:child_process';
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { abortReason } from '../backoff.js';
import type { WorkItem } from '../wire.js';
import { jsonOutput, stringList, WorkError, type RunContext, type RunOutput } from './types.js';

/** Each of stdout and stderr is kept up to this many bytes. */
export const PROCESS_OUTPUT_LIMIT = 1024 * 1024;
export const PROCESS_DEFAULT_TIMEOUT_S = 300;
export const PROCESS_MAX_TIMEOUT_S = 3600;
export const PROCESS_RUNNER_DISABLED =
  'this node does not run processes (kinds 5 and 6): its operator did not start it with --allow-process-runner';

/** What a finished process left behind; also the JSON output of kinds 5 and 6. */
export interface ProcessResult {
  exit_code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
  duration_ms: number;
  /** True when stdout or stderr passed the limit and was cut. */
  truncated: boolean;
  /** True when the wall-clock limit killed it. */
  timed_out: boolean;
}

export interface RunProcessOptions {
  program: string;
  args: string[];
  cwd: string;
  env: Record<string, string>;
  timeoutMs: number;
  signal: AbortSignal;
  outputLimit?: number;
}

/**
 * All a program run on the host sees of the environment: the agent's PATH and LANG, HOME and
 * TMPDIR the job's scratch dir (nothing else of the agent's variables reaches buyer code).
 *
 * @example
 * runProcess({ program, args, cwd: scratch, env: { ...hostEnv(scratch), SVC_X: '1' }, timeoutMs, signal });
 */
export function hostEnv(scratch: string): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
    HOME: scratch,
    TMPDIR: scratch,
    LANG: process.env.LANG ?? 'C.UTF-8',
  };
}

/**
 * Runs a program without a shell in its own process group. When the wall-clock limit passes, or
 * `signal` aborts, the whole group is killed (SIGKILL); when the program exits, whatever it left
 * running in its group is killed too. Resolves with the result (a non-zero exit is a result),
 * rejects with the abort reason when aborted, or with a retryable {@link WorkError} when the
 * program cannot start.
 *
 * @example
 * const r = await runProcess({ program: process.execPath, args: ['-e', 'console.log(1)'], cwd, env, timeoutMs: 5_000, signal });
 * r.stdout; // '1\n'
 */
export function runProcess(options: RunProcessOptions): Promise<ProcessResult> {
  const limit = options.outputLimit ?? PROCESS_OUTPUT_LIMIT;
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const child = spawn(options.program, options.args, {
      cwd: options.cwd,
      env: options.env,
      shell: false,
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const stdout = capture(child.stdout, limit);
    const stderr = capture(child.stderr, limit);
    let timedOut = false;
    let exit: { code: number | null; signal: string | null } | undefined;
    const killGroup = () => {
      if (child.pid === undefined) return;
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        // The group is already gone.
      }
    };
    const timer = setTimeout(() => {
      timedOut = true;
      killGroup();
    }, options.timeoutMs);
    const onAbort = () => killGroup();
    options.signal.addEventListener('abort', onAbort, { once: true });
    if (options.signal.aborted) killGroup();
    let settled = false;
    const finish = () => {
      if (settled || exit === undefined) return;
      settled = true;
      clearTimeout(timer);
      options.signal.removeEventListener('abort', onAbort);
      if (options.signal.aborted) {
        reject(abortReason(options.signal));
        return;
      }
      const out = stdout();
      const err = stderr();
      resolve({
        exit_code: exit.code,
        signal: exit.signal,
        stdout: out.text,
        stderr: err.text,
        duration_ms: Math.round(performance.now() - started),
        truncated: out.truncated || err.truncated,
        timed_out: timedOut,
      });
    };
    child.once('error', (err: NodeJS.ErrnoException) => {
      if (child.pid !== undefined) return; // An error after start (a kill failing) is not a start failure.
      settled = true;
      clearTimeout(timer);
      options.signal.removeEventListener('abort', onAbort);
      reject(new WorkError(`cannot start ${options.program}: ${err.code ?? err.message}`, true));
    });
    child.once('exit', (code, signal) => {
      exit = { code, signal };
      killGroup();
      // A process outside the group may still hold the pipes open; do not wait for it forever.
      setTimeout(() => {
        child.stdout.destroy();
        child.stderr.destroy();
        finish();
      }, 1_000).unref();
    });
    child.once('close', finish);
  });
}

function capture(stream: NodeJS.ReadableStream, limit: number): () => { text: string; truncated: boolean } {
  const chunks: Buffer[] = [];
  let kept = 0;
  let dropped = 0;
  stream.on('data', (chunk: Buffer) => {
    const room = Math.max(0, limit - kept);
    const part = chunk.subarray(0, room);
    if (part.length > 0) chunks.push(part);
    kept += part.length;
    dropped += chunk.length - part.length;
  });
  return () => {
    const text = Buffer.concat(chunks).toString('utf8');
    return dropped > 0
      ? { text: `${text}\n[svc: output truncated at ${limit} bytes, ${dropped} bytes dropped]`, truncated: true }
      : { text, truncated: false };
  };
}

function timeoutSeconds(value: unknown): number {
  if (value === undefined || value === null) return PROCESS_DEFAULT_TIMEOUT_S;
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0)
    throw new WorkError('payload.timeout_seconds must be a positive number', false);
  return Math.min(value, PROCESS_MAX_TIMEOUT_S);
}

/**
 * Kinds 5 `cpu_compute`, 6 `gpu_compute` and 7 `confidential_training`: runs `payload.runner_args` (program first) in a
 * fresh `<dataDir>/scratch/<work_id>` (removed afterwards) with only PATH, HOME, TMPDIR and LANG
 * set, for at most `payload.timeout_seconds` (default 300, at most 3600). Output is the
 * {@link ProcessResult} as JSON; units are `ceil(wall seconds)` (core-seconds with one core for
 * kind 5, GPU-seconds for kinds 6 and 7). Refused unless `ctx.allowProcessRunner`.
 *
 * @example
 * const out = await runProcessJob(item, { ...ctx, allowProcessRunner: true });
 */
export async function runProcessJob(item: WorkItem, ctx: RunContext): Promise<RunOutput> {
  if (!ctx.allowProcessRunner) throw new WorkError(PROCESS_RUNNER_DISABLED, false);
  const [program = '', ...args] = stringList(item.payload.runner_args, 'runner_args');
  if (program === '' || [program, ...args].some((arg) => arg.includes('\0'))) {
    throw new WorkError('payload.runner_args must name a program and hold no NUL characters', false);
  }
  const timeoutMs = timeoutSeconds(item.payload.timeout_seconds) * 1000;
  const scratch = join(ctx.dataDir, 'scratch', item.work_id);
  await rm(scratch, { recursive: true, force: true });
  await mkdir(scratch, { recursive: true, mode: 0o700 });
  const env = hostEnv(scratch);
  let result: ProcessResult;
  try {
    result = await runProcess({ program, args, cwd: scratch, env, timeoutMs, signal: ctx.signal });
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
  const seconds = Math.ceil(result.duration_ms / 1000);
  const exitCode = result.exit_code === null ? {} : { exit_code: result.exit_code };
  return {
    ...jsonOutput(result, {
      metering_units: seconds,
      usage: { wall_ms: result.duration_ms },
      engine: 'process',
      ...exitCode,
    }),
    runner: 'process',
  };
}

import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { CapsuleOrder, CheckRun, ExecuteResult, PreflightResult, RepositoryWorkPayload } from '@svc/protocol';
import { buyerRunner, type BuyerRunner } from './compute-job.js';
import { fetchPayload } from './fetch-payload.js';
import { runContainer, shareTree, writableDir } from './oci-runner.js';
import { hostEnv, runProcess, type ProcessResult } from './process-runner.js';
import { detectTooling, missingTooling } from './tooling.js';
import { jsonOutput, WorkError, type RunContext, type RunOutput } from './types.js';

const run = promisify(execFile);

export const CAPSULE_DISABLED =
  'this node runs no repository work (kind 9): its operator did not start it with --capsule';
/** A base bundle larger than this is refused. */
export const BUNDLE_MAX_BYTES = 200 * 1024 * 1024;
const DIFF_LIMIT = 1024 * 1024;
const TAIL = 2000;
const MAX_CHECKS = 20;
const BRANCH = /^(?!.*\.\.)(?!\/)(?!.*\/$)[A-Za-z0-9._/-]{1,200}$/;
const SHA = /^[0-9a-f]{40}$/;

/** The program the operator configured with `svc node --capsule CMD`, run for every order. */
export interface CapsuleConfig {
  program: string;
  args: string[];
  /** Extra variables handed to the capsule (the reference capsule's gateway key and URL). */
  env?: Record<string, string>;
}

function gitEnv(home: string): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: home,
    LANG: 'C.UTF-8',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_TERMINAL_PROMPT: '0',
  };
}

async function git(cwd: string, home: string, args: string[], maxBuffer = 64 * 1024 * 1024): Promise<string> {
  try {
    // The oci runner hands the working copy to the container's user (shareTree): this git, the
    // agent's, still trusts it. Its .git was read-only in the container, so nothing there is the capsule's.
    const { stdout } = await run('git', ['-c', `safe.directory=${cwd}`, ...args], {
      cwd,
      env: gitEnv(home),
      maxBuffer,
      encoding: 'utf8',
    });
    return stdout;
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new WorkError(`git ${args[0] ?? ''} failed: ${(e.stderr ?? e.message).trim().slice(0, 500)}`, false);
  }
}

const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');
const tail = (text: string) => text.slice(-TAIL);

function payloadOf(raw: Record<string, unknown>): RepositoryWorkPayload {
  const p = raw as Partial<RepositoryWorkPayload>;
  if (p.mode !== 'preflight' && p.mode !== 'execute')
    throw new WorkError("payload.mode must be 'preflight' or 'execute'", false);
  if (typeof p.bundle_url !== 'string') throw new WorkError('payload.bundle_url must be a URL', false);
  if (typeof p.base_branch !== 'string' || !BRANCH.test(p.base_branch))
    throw new WorkError('payload.base_branch must be a branch name', false);
  if (typeof p.base_commit !== 'string' || !SHA.test(p.base_commit))
    throw new WorkError('payload.base_commit must be a commit id', false);
  if (
    p.mode === 'execute' &&
    (typeof p.order !== 'object' ||
      p.order === null ||
      typeof p.order.work_branch !== 'string' ||
      !BRANCH.test(p.order.work_branch))
  ) {
    throw new WorkError('payload.order must name a work_branch', false);
  }
  const timeout =
    typeof p.timeout_seconds === 'number' && p.timeout_seconds > 0 ? Math.min(p.timeout_seconds, 3600) : 900;
  return { ...(p as RepositoryWorkPayload), timeout_seconds: timeout };
}

/** Clones the base branch from the control plane's bundle into `<scratch>/repo`. */
async function checkout(p: RepositoryWorkPayload, ctx: RunContext, scratch: string): Promise<string> {
  const bundle = await fetchPayload(p.bundle_url, {
    signal: ctx.signal,
    fetch: ctx.fetch,
    trustedOrigin: ctx.trustedOrigin,
    maxBytes: BUNDLE_MAX_BYTES,
  });
  const bundlePath = join(scratch, 'base.bundle');
  await writeFile(bundlePath, bundle);
  const repo = join(scratch, 'repo');
  await git(scratch, scratch, ['clone', '--quiet', '--branch', p.base_branch, bundlePath, repo]);
  const head = (await git(repo, scratch, ['rev-parse', 'HEAD'])).trim();
  if (head !== p.base_commit)
    throw new WorkError(`the bundle's ${p.base_branch} is ${head}, the order names ${p.base_commit}`, false);
  return repo;
}

/** The argv lists in `value` (non-empty lists of strings without NUL); anything else dropped. */
function argvList(value: unknown): string[][] {
  return Array.isArray(value)
    ? value.filter(
        (c): c is string[] =>
          Array.isArray(c) && c.length > 0 && c.every((a) => typeof a === 'string' && !a.includes('\0')),
      )
    : [];
}

/** The capsule's answer file: a summary and the check commands (argv lists) it wants run. */
async function capsuleAnswer(path: string): Promise<{ summary: string | null; checks: string[][] }> {
  let parsed: unknown;
  try {
    // Not through a link: in a container the capsule made this file, and a link would name the host's files.
    parsed = JSON.parse(await readFile(path, { encoding: 'utf8', flag: constants.O_RDONLY | constants.O_NOFOLLOW }));
  } catch {
    return { summary: null, checks: [] };
  }
  const o = (typeof parsed === 'object' && parsed !== null ? parsed : {}) as { summary?: unknown; checks?: unknown };
  const checks = argvList(o.checks);
  return {
    summary: typeof o.summary === 'string' ? o.summary.slice(0, 2000) : null,
    checks: checks.slice(0, MAX_CHECKS),
  };
}

/**
 * The server's checks, then the capsule's: the order's `check_commands` (what the server derived
 * from the base's tooling for the required checks) run first, on the tree as committed, before
 * any command the capsule chose could change it; a command both name runs once.
 */
function checkCommands(capsule: string[][], server: unknown): string[][] {
  const fromServer = argvList(server).slice(0, MAX_CHECKS);
  const key = (argv: string[]) => JSON.stringify(argv);
  const first = new Set(fromServer.map(key));
  return [...fromServer, ...capsule.filter((argv) => !first.has(key(argv)))];
}

/**
 * Where the capsule and the checks run: on the host (the process runner) or each in a fresh
 * container of the oci runner. `orderPath` and `answerPath` are the files as the capsule sees them.
 */
interface Sandbox {
  orderPath: string;
  answerPath: string;
  run(step: string, argv: string[], env: Record<string, string>, timeoutMs: number): Promise<ProcessResult>;
}

function hostSandbox(ctx: RunContext, scratch: string, repo: string, io: string): Sandbox {
  return {
    orderPath: join(io, 'order.json'),
    answerPath: join(io, 'capsule-result.json'),
    run: (_step, [program = '', ...args], env, timeoutMs) =>
      runProcess({
        program,
        args,
        cwd: repo,
        timeoutMs,
        signal: ctx.signal,
        env: { ...hostEnv(scratch), ...env },
      }),
  };
}

/**
 * The oci runner: the clone's working tree at `/work/repo` (the capsule's to edit), its `.git`
 * mounted read-only over it (history to read; the hooks and config the agent's git runs with stay
 * the agent's), the order and answer in `/svc`, no network, the job's limits.
 */
async function containerSandbox(
  workId: string,
  ctx: RunContext,
  chosen: Extract<BuyerRunner, { runner: 'oci' }>,
  repo: string,
  io: string,
): Promise<Sandbox> {
  await shareTree(repo, chosen.oci, new Set([join(repo, '.git')]));
  await writableDir(io, chosen.oci);
  return {
    orderPath: '/svc/order.json',
    answerPath: '/svc/capsule-result.json',
    run: (step, argv, env, timeoutMs) =>
      runContainer({
        oci: chosen.oci,
        workId: `${workId}-${step}`,
        image: chosen.image,
        argv,
        mounts: [
          { host: repo, container: '/work/repo', readOnly: false },
          { host: join(repo, '.git'), container: '/work/repo/.git', readOnly: true },
          { host: io, container: '/svc', readOnly: false },
        ],
        env: { HOME: '/tmp', TMPDIR: '/tmp', LANG: 'C.UTF-8', ...env },
        workdir: '/work/repo',
        limits: { ...chosen.limits, timeout_s: timeoutMs / 1000 },
        gpu: false,
        network: false,
        signal: ctx.signal,
      }),
  };
}

function checkRun(argv: string[], r: ProcessResult): CheckRun {
  const output = r.stdout + r.stderr;
  return {
    command: argv.join(' '),
    argv,
    exit_code: r.exit_code,
    timed_out: r.timed_out,
    duration_ms: r.duration_ms,
    output_sha256: sha256(output),
    output_tail: tail(output),
  };
}

async function execute(
  p: RepositoryWorkPayload,
  ctx: RunContext,
  capsule: CapsuleConfig,
  scratch: string,
  repo: string,
  item: { work_id: string; payload: Record<string, unknown> },
): Promise<ExecuteResult & { runner: string; image?: string }> {
  const order = p.order as CapsuleOrder;
  const deadline = Date.now() + p.timeout_seconds * 1000;
  const left = () => Math.max(1000, deadline - Date.now());
  await git(repo, scratch, ['checkout', '--quiet', '-b', order.work_branch]);
  const io = join(scratch, 'io');
  await mkdir(io, { recursive: true, mode: 0o700 });
  await writeFile(join(io, 'order.json'), JSON.stringify({ ...order, tooling: await detectTooling(repo) }, null, 2));
  // Kind 9's capsule reaches nothing: the agent fetched the repository, and hands back the result.
  const chosen = buyerRunner({ ...item.payload, network: 'none' }, ctx);
  const sandbox =
    chosen.runner === 'oci'
      ? await containerSandbox(item.work_id, ctx, chosen, repo, io)
      : hostSandbox(ctx, scratch, repo, io);
  const cap = await sandbox.run(
    'capsule',
    [capsule.program, ...capsule.args],
    { ...capsule.env, SVC_WORK_ORDER: sandbox.orderPath, SVC_CAPSULE_RESULT: sandbox.answerPath },
    left(),
  );
  const answer = await capsuleAnswer(join(io, 'capsule-result.json'));
  // The capsule's edits become one commit first, so nothing the checks write gets into it.
  await git(repo, scratch, ['add', '--all']);
  const staged = (await git(repo, scratch, ['diff', '--cached', '--name-only'])).trim();
  let commit: string | null = null;
  if (staged !== '') {
    const message = `${order.title ?? order.goal}`.slice(0, 200) + `\n\nSVC work order ${order.work_order_id}`;
    await git(repo, scratch, [
      '-c',
      'user.name=SVC capsule',
      '-c',
      'user.email=capsule@svc.invalid',
      'commit',
      '--quiet',
      '--no-verify',
      '-m',
      message,
    ]);
    commit = (await git(repo, scratch, ['rev-parse', 'HEAD'])).trim();
  }
  const checks: CheckRun[] = [];
  if (cap.exit_code === 0 && !cap.timed_out) {
    for (const [i, argv] of checkCommands(answer.checks, order.check_commands).entries()) {
      const r = await sandbox.run(`check-${i + 1}`, argv, {}, left()).catch((err: unknown): ProcessResult => ({
        exit_code: null,
        signal: null,
        stdout: '',
        stderr: err instanceof Error ? err.message : String(err),
        duration_ms: 0,
        truncated: false,
        timed_out: false,
      }));
      checks.push(checkRun(argv, r));
    }
  }
  const diff =
    commit === null ? '' : await git(repo, scratch, ['diff', '--no-color', '--no-ext-diff', p.base_commit, commit]);
  const changed =
    commit === null
      ? []
      : (await git(repo, scratch, ['diff', '-z', '--name-only', '--no-renames', p.base_commit, commit]))
          .split('\0')
          .filter(Boolean);
  let bundle: string | null = null;
  if (commit !== null) {
    const bundlePath = join(scratch, 'work.bundle');
    await git(repo, scratch, ['bundle', 'create', '--quiet', bundlePath, `${p.base_commit}..${order.work_branch}`]);
    bundle = (await readFile(bundlePath)).toString('base64');
  }
  const capOutput = cap.stdout + cap.stderr;
  return {
    mode: 'execute',
    base_branch: p.base_branch,
    base_commit: p.base_commit,
    work_branch: order.work_branch,
    commit_sha: commit,
    changed_paths: changed,
    diff: diff.slice(0, DIFF_LIMIT),
    diff_truncated: diff.length > DIFF_LIMIT,
    capsule: {
      exit_code: cap.exit_code,
      timed_out: cap.timed_out,
      duration_ms: cap.duration_ms,
      output_sha256: sha256(capOutput),
      output_tail: tail(capOutput),
      summary: answer.summary,
    },
    checks,
    bundle_base64: bundle,
    runner: chosen.runner,
    ...(chosen.runner === 'oci' ? { image: chosen.image } : {}),
  };
}

/**
 * Kind 9 `repository_work`: clones the base branch from the control plane's bundle into a fresh
 * `<dataDir>/scratch/<work_id>` (removed afterwards). `preflight` detects the tooling and checks
 * the requested tools; `execute` creates `work_branch`, runs the operator's capsule (no shell, a
 * time limit, cwd the clone, the order in `$SVC_WORK_ORDER`) and the checks, each in a container
 * of the oci runner when the node has it (no network; the working copy writable, its .git
 * read-only), else on the host only with `--allow-process-runner` (HOME and TMPDIR the scratch dir),
 * commits what it changed, runs the order's `check_commands` (the server's, derived from the
 * base's tooling) and then the check commands the capsule named in `$SVC_CAPSULE_RESULT`, and
 * reports the diff, changed paths, every check with its exit code and output hash, the
 * commit and a bundle of it. One run is one metering unit. Refused without a capsule.
 *
 * @example
 * const out = await runRepositoryWork(item, { ...ctx, capsule: { program: './capsule.mjs', args: [] } });
 */
export async function runRepositoryWork(
  item: { work_id: string; payload: Record<string, unknown> },
  ctx: RunContext,
): Promise<RunOutput> {
  const capsule = ctx.capsule;
  if (capsule === undefined) throw new WorkError(CAPSULE_DISABLED, false);
  const p = payloadOf(item.payload);
  const scratch = join(ctx.dataDir, 'scratch', item.work_id);
  await rm(scratch, { recursive: true, force: true });
  await mkdir(scratch, { recursive: true, mode: 0o700 });
  try {
    const repo = await checkout(p, ctx, scratch);
    if (p.mode === 'preflight') {
      const tooling = await detectTooling(repo);
      const requested = p.tooling ?? [];
      const missing = missingTooling(tooling, requested);
      const result: PreflightResult = {
        mode: 'preflight',
        base_branch: p.base_branch,
        base_commit: p.base_commit,
        tooling,
        requested,
        missing,
        status: missing.length === 0 ? 'ready' : 'blocked',
      };
      return jsonOutput(result, { metering_units: 1, usage: { runs: 1 }, engine: 'repository' });
    }
    const { runner, image, ...result } = await execute(p, ctx, capsule, scratch, repo, item);
    return {
      ...jsonOutput(result, {
        metering_units: 1,
        usage: { runs: 1, checks: result.checks.length },
        engine: 'capsule',
        ...(result.capsule.exit_code === null ? {} : { exit_code: result.capsule.exit_code }),
      }),
      runner,
      ...(image === undefined ? {} : { image }),
    };
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

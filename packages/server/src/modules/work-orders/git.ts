import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { isIP } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { toolingFromFiles, type DetectedTooling, type ReadTopLevelFile } from '@svc/protocol';

/**
 * The server's side of repository work, through Debian's `git` (execFile, never a shell). The
 * server holds the host token, so it alone talks to the repository host: it fetches the base
 * branch into a bundle the node clones, and pushes the node's commits (a bundle in the signed
 * result) once approved. The token reaches git as an `http.extraHeader` through
 * `GIT_CONFIG_*` variables: never in argv (the process list), a URL, or a message.
 */

const run = promisify(execFile);
const TIMEOUT_MS = 120_000;

export class GitError extends Error {
  override name = 'GitError';
  /** `refused`: git ran to its end and exited non-zero (a verdict on its input), rather than failing to run or being killed. */
  constructor(
    message: string,
    readonly refused = false,
  ) {
    super(message);
  }
}

/**
 * The node's work bundle, read by git, does not hold what the node reported: git refused to fetch
 * its work branch from it, the branch's head is another commit, or the commit does not descend
 * from the base. The server proved the node's report false (docs/work-orders.md).
 */
export class WorkMismatch extends GitError {
  override name = 'WorkMismatch';
}

/** Where and how to reach a repository. */
export interface Remote {
  url: string;
  token: string | null;
  /**
   * The addresses the egress guard checked for the URL's host: git connects to these only
   * (`http.curloptResolve`), so a second DNS answer cannot move the host (DNS rebinding).
   */
  addresses: readonly string[];
}

/**
 * The `-c` arguments that pin `remote`'s host to the addresses the egress guard checked: libcurl's
 * resolve list (`host:port:addr[,addr]`, IPv6 in brackets). None for an IP literal (nothing to
 * resolve) or when nothing was checked.
 *
 * @example
 * pinnedResolve({ url: 'https://git.example/a.git', token: null, addresses: ['203.0.113.7'] }); // ['-c', 'http.curloptResolve=git.example:443:203.0.113.7']
 */
export function pinnedResolve(remote: Remote): string[] {
  const url = new URL(remote.url);
  const host = url.hostname;
  if (remote.addresses.length === 0 || isIP(host.replace(/^\[|\]$/g, '')) !== 0) return [];
  const port = url.port || (url.protocol === 'https:' ? '443' : '80');
  const addresses = remote.addresses.map((a) => (isIP(a) === 6 ? `[${a}]` : a)).join(',');
  return ['-c', `http.curloptResolve=${host}:${port}:${addresses}`];
}

function env(remote: Remote | null): Record<string, string> {
  const base: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: tmpdir(),
    LANG: 'C.UTF-8',
    GIT_CONFIG_NOSYSTEM: '1',
    GIT_TERMINAL_PROMPT: '0',
    GIT_ASKPASS: '/bin/false',
  };
  // Redirects are not followed: the egress check covered this URL, not wherever it points next.
  // A host that stops sending for 30 s is given up on (the overall limit is TIMEOUT_MS).
  const config: [string, string][] = [
    ['http.followRedirects', 'false'],
    ['protocol.ext.allow', 'never'],
    ['http.lowSpeedLimit', '1'],
    ['http.lowSpeedTime', '30'],
    ['user.name', 'SVC'],
    ['user.email', 'work-orders@svc.invalid'],
  ];
  if (remote?.token)
    config.push([
      'http.extraHeader',
      `Authorization: Basic ${Buffer.from(`x-access-token:${remote.token}`).toString('base64')}`,
    ]);
  base.GIT_CONFIG_COUNT = String(config.length);
  config.forEach(([k, v], i) => {
    base[`GIT_CONFIG_KEY_${i}`] = k;
    base[`GIT_CONFIG_VALUE_${i}`] = v;
  });
  return base;
}

async function git(cwd: string, args: string[], remote: Remote | null = null): Promise<string> {
  try {
    const { stdout } = await run('git', remote ? [...pinnedResolve(remote), ...args] : args, {
      cwd,
      env: env(remote),
      timeout: TIMEOUT_MS,
      maxBuffer: 256 * 1024 * 1024,
      encoding: 'utf8',
    });
    return stdout;
  } catch (err) {
    const e = err as { stderr?: string; message: string; code?: unknown; killed?: boolean };
    let why = (e.stderr || e.message).trim().split('\n').slice(-3).join(' ');
    if (remote?.token) why = why.split(remote.token).join('[redacted]');
    throw new GitError(`git ${args[0] ?? ''}: ${why.slice(0, 400)}`, typeof e.code === 'number' && e.killed !== true);
  }
}

async function scratch<T>(fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), 'svc-work-'));
  try {
    return await fn(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * Fetches `branch` and answers a bundle of it (what the node clones) with its head commit.
 *
 * @example
 * const { bundle, commit } = await fetchBaseBundle({ url, token }, 'main');
 */
export async function fetchBaseBundle(
  remote: Remote,
  branch: string,
): Promise<{ bundle: Buffer; commit: string; tooling: DetectedTooling }> {
  return scratch(async (dir) => {
    await git(
      dir,
      ['clone', '--quiet', '--bare', '--single-branch', '--branch', branch, '--', remote.url, 'repo.git'],
      remote,
    );
    const repo = join(dir, 'repo.git');
    const commit = (await git(repo, ['rev-parse', `refs/heads/${branch}`])).trim();
    await git(repo, ['bundle', 'create', '--quiet', join(dir, 'base.bundle'), `refs/heads/${branch}`]);
    const tooling = await toolingFromFiles(await topLevelFiles(repo, commit));
    return { bundle: await readFile(join(dir, 'base.bundle')), commit, tooling };
  });
}

/** Reads the regular files at the top of `rev`'s tree (what tooling detection looks at). */
async function topLevelFiles(repo: string, rev: string): Promise<ReadTopLevelFile> {
  const files = new Set<string>();
  for (const entry of (await git(repo, ['ls-tree', '-z', rev])).split('\0')) {
    const [meta = '', name = ''] = entry.split('\t');
    const [mode, type] = meta.split(' ');
    if (type === 'blob' && (mode === '100644' || mode === '100755')) files.add(name);
  }
  return async (name) => (files.has(name) ? git(repo, ['cat-file', 'blob', `${rev}:${name}`]) : undefined);
}

/** A bare repository holding the base bundle and the node's work bundle. */
async function loadBundles(dir: string, baseBundle: Buffer, workBundle: Buffer, workBranch: string): Promise<string> {
  const repo = join(dir, 'work.git');
  await git(dir, ['init', '--quiet', '--bare', repo]);
  await writeFile(join(dir, 'base.bundle'), baseBundle);
  await writeFile(join(dir, 'work.bundle'), workBundle);
  await git(repo, ['fetch', '--quiet', join(dir, 'base.bundle'), 'refs/heads/*:refs/base/*']);
  await git(repo, [
    'fetch',
    '--quiet',
    join(dir, 'work.bundle'),
    `refs/heads/${workBranch}:refs/heads/${workBranch}`,
  ]).catch((err: unknown) => {
    throw err instanceof GitError && err.refused ? new WorkMismatch(err.message) : err;
  });
  return repo;
}

/** What the server reads out of a node's work bundle itself, rather than taking the node's word. */
export interface InspectedWork {
  /** `git diff --name-only --no-renames base commit`. */
  changed_paths: string[];
  /** `git diff base commit`, cut at {@link DIFF_LIMIT} characters. */
  diff: string;
  diff_truncated: boolean;
}

const DIFF_LIMIT = 1024 * 1024;

/**
 * Opens the node's work bundle on top of the base bundle and computes what its commit changes:
 * the paths and the diff against `baseCommit`. Throws {@link WorkMismatch} when the bundle does not
 * hold `workBranch` at `commit`, or `commit` does not descend from `baseCommit`, and
 * {@link GitError} when git could not do its part (the server's failure, not the node's). Runs no remote.
 *
 * @example
 * const { changed_paths } = await inspectWork({ baseBundle, workBundle, workBranch: 'svc/wo-1', baseCommit, commit });
 */
export async function inspectWork(input: {
  baseBundle: Buffer;
  workBundle: Buffer;
  workBranch: string;
  baseCommit: string;
  commit: string;
}): Promise<InspectedWork> {
  return scratch(async (dir) => {
    const repo = await loadBundles(dir, input.baseBundle, input.workBundle, input.workBranch);
    await headIs(repo, input.workBranch, input.commit);
    const descends = await git(repo, ['merge-base', '--is-ancestor', input.baseCommit, input.commit]).then(
      () => true,
      () => false,
    );
    if (!descends)
      throw new WorkMismatch(`the commit ${input.commit} does not descend from the base ${input.baseCommit}`);
    const names = await git(repo, ['diff', '-z', '--name-only', '--no-renames', input.baseCommit, input.commit]);
    const diff = await git(repo, ['diff', '--no-color', '--no-ext-diff', input.baseCommit, input.commit]);
    return {
      changed_paths: names.split('\0').filter(Boolean),
      diff: diff.slice(0, DIFF_LIMIT),
      diff_truncated: diff.length > DIFF_LIMIT,
    };
  });
}

async function headIs(repo: string, workBranch: string, commit: string): Promise<void> {
  const head = (await git(repo, ['rev-parse', `refs/heads/${workBranch}`])).trim();
  if (head !== commit)
    throw new WorkMismatch(`the work bundle's ${workBranch} is ${head}, the certified commit is ${commit}`);
}

/**
 * Pushes the node's commits as `workBranch`, after checking the bundle's head is `commit`.
 *
 * @example
 * await pushWorkBranch({ url, token }, { baseBundle, workBundle, workBranch: 'svc/wo-1', commit });
 */
export async function pushWorkBranch(
  remote: Remote,
  input: { baseBundle: Buffer; workBundle: Buffer; workBranch: string; commit: string },
): Promise<void> {
  await scratch(async (dir) => {
    const repo = await loadBundles(dir, input.baseBundle, input.workBundle, input.workBranch);
    await headIs(repo, input.workBranch, input.commit);
    await git(
      repo,
      ['push', '--quiet', '--', remote.url, `refs/heads/${input.workBranch}:refs/heads/${input.workBranch}`],
      remote,
    );
  });
}

/**
 * Rolls an order back to its base commit. When the work's commit has reached `baseBranch`, a
 * branch `rollbackBranch` off the current base reverts every commit from `baseCommit` to
 * `commit` and is pushed (`reverted`); otherwise nothing reached the base and the work branch is
 * deleted from the host (`withdrawn`).
 */
export async function rollBack(
  remote: Remote,
  input: {
    baseBundle: Buffer;
    workBundle: Buffer;
    baseBranch: string;
    baseCommit: string;
    commit: string;
    workBranch: string;
    rollbackBranch: string;
  },
): Promise<{ outcome: 'reverted'; revert_commit: string } | { outcome: 'withdrawn' }> {
  return scratch(async (dir) => {
    const bare = await loadBundles(dir, input.baseBundle, input.workBundle, input.workBranch);
    await git(bare, ['fetch', '--quiet', '--', remote.url, `refs/heads/${input.baseBranch}:refs/remote-base`], remote);
    const merged = await git(bare, ['merge-base', '--is-ancestor', input.commit, 'refs/remote-base']).then(
      () => true,
      () => false,
    );
    if (!merged) {
      await git(bare, ['push', '--quiet', '--', remote.url, `:refs/heads/${input.workBranch}`], remote).catch(
        () => undefined,
      );
      return { outcome: 'withdrawn' as const };
    }
    const work = join(dir, 'revert');
    await git(bare, ['branch', 'svc-rollback-base', 'refs/remote-base']);
    await git(dir, ['clone', '--quiet', '--branch', 'svc-rollback-base', bare, work]);
    // The clone has the base only; the commits to revert come from the bare repository.
    await git(work, ['fetch', '--quiet', bare, `refs/heads/${input.workBranch}`]);
    await git(work, ['checkout', '--quiet', '-b', input.rollbackBranch]);
    await git(work, ['revert', '--no-edit', `${input.baseCommit}..${input.commit}`]);
    const revert = (await git(work, ['rev-parse', 'HEAD'])).trim();
    await git(work, ['push', '--quiet', '--', remote.url, `HEAD:refs/heads/${input.rollbackBranch}`], remote);
    return { outcome: 'reverted' as const, revert_commit: revert };
  });
}

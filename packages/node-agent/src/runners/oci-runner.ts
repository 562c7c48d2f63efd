import { execFile, spawn } from 'node:child_process';
import { chown, lchown, lstat, mkdir, readdir } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';
import { abortReason } from '../backoff.js';
import type { OciConfig } from './oci-config.js';
import { ROOT_USERNS_BASE } from './oci-detect.js';
import { runProcess, type ProcessResult } from './process-runner.js';
import { WorkError } from './types.js';

export type { OciConfig };

/** The limits one container runs with. */
export interface ContainerLimits {
  memory_mb: number;
  cpus: number;
  pids: number;
  timeout_s: number;
}

export interface ContainerMount {
  host: string;
  container: string;
  readOnly: boolean;
}

export interface RunContainerOptions {
  oci: OciConfig;
  workId: string;
  image: string;
  argv: string[];
  mounts: ContainerMount[];
  env: Record<string, string>;
  workdir: string;
  limits: ContainerLimits;
  /** Give the container every NVIDIA GPU through CDI (kind 6 on a node whose podman has the spec). */
  gpu: boolean;
  /**
   * A job granted egress (`network: "egress"` on a node started with --allow-job-network) gets
   * slirp4netns: user-mode NAT out, the host's loopback not reachable. Otherwise no network.
   */
  network?: boolean;
  signal: AbortSignal;
}

/** A finished container: the process runner's result, and whether the kernel OOM-killed it. */
export interface ContainerResult extends ProcessResult {
  oom_killed: boolean;
}

const podmanRun = (podman: string, args: string[]): Promise<{ ok: boolean; out: string }> =>
  new Promise((resolve) =>
    execFile(podman, args, { timeout: 60_000, encoding: 'utf8' }, (err, stdout, stderr) =>
      resolve({ ok: err === null, out: err === null ? stdout.trim() : (stderr || err.message).trim() }),
    ),
  );

/**
 * Removes every container labelled `svc.node=<label>` (those a killed agent left), returning
 * how many. Run at every start, before any work.
 *
 * @example
 * await removeLeftoverContainers('podman', 'nod_123'); // 0
 */
export async function removeLeftoverContainers(podman: string, label: string): Promise<number> {
  const list = await podmanRun(podman, ['ps', '-a', '-q', '--filter', `label=svc.node=${label}`]);
  const ids = list.ok ? list.out.split('\n').filter(Boolean) : [];
  if (ids.length > 0) await podmanRun(podman, ['rm', '-f', '-t', '0', ...ids]);
  return ids.length;
}

/**
 * Loads an OCI (or docker) archive into podman's store and returns the image references it
 * holds (`podman load -i FILE`: no registry involved).
 *
 * @example
 * await loadImageArchive('podman', './busybox.oci.tar'); // ['localhost/busybox:1']
 */
export async function loadImageArchive(podman: string, file: string): Promise<string[]> {
  const r = await podmanRun(podman, ['load', '-q', '-i', file]);
  if (!r.ok) throw new Error(`podman load -i ${file} failed: ${r.out.slice(0, 500)}`);
  const refs = [...r.out.matchAll(/Loaded image(?:\(s\))?:\s*(.+)/g)].flatMap((m) =>
    (m[1] ?? '').split(',').map((s) => s.trim()),
  );
  if (refs.length === 0) throw new Error(`podman load -i ${file} named no image: ${r.out.slice(0, 200)}`);
  return refs;
}

/**
 * Whether podman's store holds the image `ref` (`podman image exists`: no registry asked).
 *
 * @example
 * await imageExists('podman', 'localhost/svc-runner:1'); // true
 */
export async function imageExists(podman: string, ref: string): Promise<boolean> {
  return (await podmanRun(podman, ['image', 'exists', ref])).ok;
}

/** A container name from a work id: podman's names are `[a-zA-Z0-9][a-zA-Z0-9_.-]*`. */
const containerName = (workId: string) => `svc-${workId.replace(/[^a-zA-Z0-9_.-]/g, '_')}`;

/**
 * Starts a watcher outside the agent that removes the container when its stdin closes: when the
 * run ends (the agent closes it), and when the agent dies however it dies (kill -9 included: the
 * kernel closes the pipe), so no container outlives the agent by more than a `podman rm`.
 */
function removalWatch(podman: string, name: string): { release: () => Promise<void> } {
  const watcher = spawn('/bin/sh', ['-c', 'read _ignored; exec "$0" rm -f -t 0 "$1" >/dev/null 2>&1', podman, name], {
    detached: true,
    stdio: ['pipe', 'ignore', 'ignore'],
  });
  const exited = new Promise<void>((resolve) => {
    watcher.once('exit', () => resolve());
    watcher.once('error', () => resolve());
  });
  watcher.stdin.on('error', () => undefined);
  return {
    release: async () => {
      watcher.stdin.end();
      await exited;
    },
  };
}

/**
 * Runs `argv` in a fresh container of `image`: no network, a read-only root, a tmpfs `/tmp`, the
 * given mounts, all capabilities dropped, no new privileges, the memory (swap included), CPU, pids
 * and wall-time limits, the host's user-namespace mapping, labelled `svc.node` and `svc.work`.
 * The container is always removed afterwards, also when the agent is killed. A non-zero exit is
 * a result; `oom_killed` says the kernel killed it for passing its memory limit.
 *
 * @example
 * const r = await runContainer({ oci, workId, image: 'localhost/busybox:1', argv: ['sh', '-c', 'echo hi'], mounts: [], env: {}, workdir: '/tmp', limits, gpu: false, signal });
 */
export async function runContainer(options: RunContainerOptions): Promise<ContainerResult> {
  const { oci, limits } = options;
  const podman = oci.probe.podman;
  const name = containerName(options.workId);
  await podmanRun(podman, ['rm', '-f', '-t', '0', name]);
  const create = [
    'create',
    '--name',
    name,
    '--label',
    `svc.node=${oci.nodeLabel}`,
    '--label',
    `svc.work=${options.workId}`,
    ...(oci.probe.runtime ? ['--runtime', oci.probe.runtime] : []),
    ...oci.probe.userns,
    // slirp4netns leaves allow_host_loopback off: a granted job reaches the outside, not the
    // node's own loopback services (the agent, an engine, the operator's databases).
    options.network === true ? '--network=slirp4netns' : '--network=none',
    '--read-only',
    '--tmpfs',
    '/tmp:rw,size=64m,mode=1777',
    '--cap-drop=all',
    '--security-opt=no-new-privileges',
    '--memory',
    `${limits.memory_mb}m`,
    '--memory-swap',
    `${limits.memory_mb}m`,
    '--cpus',
    String(limits.cpus),
    '--pids-limit',
    String(limits.pids),
    // Under the host's hard limits: podman's own defaults are above them on some hosts ("error setting rlimit type 7").
    '--ulimit',
    'nofile=1024:1024',
    '--ulimit',
    `nproc=${limits.pids}:${limits.pids}`,
    // conmon's own deadline: the container ends even if this agent is gone.
    '--timeout',
    String(Math.ceil(limits.timeout_s) + 10),
    ...(options.gpu ? ['--device', 'nvidia.com/gpu=all'] : []),
    '--workdir',
    options.workdir,
    ...Object.entries(options.env).flatMap(([k, v]) => ['--env', `${k}=${v}`]),
    ...options.mounts.flatMap((m) => ['--volume', `${m.host}:${m.container}:${m.readOnly ? 'ro' : 'rw'}`]),
    '--',
    options.image,
    ...options.argv,
  ];
  const watch = removalWatch(podman, name);
  try {
    const created = await podmanRun(podman, create);
    if (!created.ok) throw new WorkError(`podman could not create the container: ${created.out.slice(0, 500)}`, false);
    if (options.signal.aborted) throw abortReason(options.signal);
    const result = await runProcess({
      program: podman,
      args: ['start', '--attach', name],
      cwd: '/',
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C.UTF-8' },
      timeoutMs: limits.timeout_s * 1000,
      signal: options.signal,
    });
    if (result.timed_out) await podmanRun(podman, ['kill', name]);
    const state = await podmanRun(podman, ['inspect', '--format', '{{.State.OOMKilled}} {{.State.ExitCode}}', name]);
    const [oom, code] = state.out.split(' ');
    return {
      ...result,
      exit_code: result.timed_out ? null : state.ok ? Number(code) : result.exit_code,
      // runc on cgroup v1 does not report an OOM kill (OOMKilled stays false): a SIGKILL exit
      // (137) that our time limit did not cause is the kernel's OOM killer at the memory limit.
      oom_killed: oom === 'true' || (!result.timed_out && state.ok && Number(code) === 137),
    };
  } finally {
    await watch.release();
  }
}

/**
 * Makes a directory the container's root can write to: with a mapped range (podman as root) the
 * container's root is host uid {@link ROOT_USERNS_BASE}, so the directory is handed to it.
 *
 * @example
 * await writableDir(join(scratch, 'output'), oci);
 */
export async function writableDir(dir: string, oci: OciConfig): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  if (!oci.probe.rootless) await chown(dir, ROOT_USERNS_BASE, ROOT_USERNS_BASE);
}

/**
 * Hands a tree to the container's root (recursively, links themselves not followed), except the
 * paths in `skip`: with a mapped range (podman as root) files the agent made are not the
 * container's, so a read-only input could not be read and a working copy not edited. Rootless
 * podman maps the agent's own user to the container's root: nothing to do.
 *
 * @example
 * await shareTree(join(scratch, 'repo'), oci, new Set([join(scratch, 'repo', '.git')]));
 */
export async function shareTree(root: string, oci: OciConfig, skip: ReadonlySet<string> = new Set()): Promise<void> {
  if (oci.probe.rootless) return;
  const walk = async (path: string): Promise<void> => {
    await lchown(path, ROOT_USERNS_BASE, ROOT_USERNS_BASE);
    if (!(await lstat(path)).isDirectory()) return;
    for (const name of await readdir(path)) {
      const full = join(path, name);
      if (!skip.has(full)) await walk(full);
    }
  };
  await walk(root);
}

/**
 * The regular files a container left in `root`, `/`-separated, with their sizes (links and
 * devices are skipped: the container chose them, the host does not follow them).
 *
 * @example
 * await listOutputFiles(outputDir); // [{ path: 'result.txt', bytes: 3 }]
 */
export async function listOutputFiles(root: string): Promise<{ path: string; bytes: number }[]> {
  const out: { path: string; bytes: number }[] = [];
  const walk = async (dir: string): Promise<void> => {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      const full = join(dir, entry.name);
      const info = await lstat(full);
      if (info.isDirectory()) await walk(full);
      else if (info.isFile()) out.push({ path: relative(root, full).split(sep).join('/'), bytes: info.size });
    }
  };
  await walk(root);
  return out.sort((a, b) => a.path.localeCompare(b.path));
}

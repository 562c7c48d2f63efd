import { execFile } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';

/** Where podman looks for CDI specs (the Container Device Interface's default directories). */
export const CDI_SPEC_DIRS: readonly string[] = ['/etc/cdi', '/var/run/cdi'];

/** How the `oci` runner starts containers on this host, and why (`svc node doctor` prints it). */
export interface OciRunnerProbe {
  /** True when podman answered and a runtime that works on this host's cgroups was found. */
  available: boolean;
  /** The podman binary. */
  podman: string;
  podmanVersion?: string;
  /** `crun` where it works (cgroup v2), else `runc`. */
  runtime?: 'crun' | 'runc';
  cgroupVersion?: 'v1' | 'v2';
  /** Podman runs as an unprivileged user (rootless): container root is that user. */
  rootless: boolean;
  /**
   * Podman flags mapping container ids to a host range when podman runs as root, so container root
   * is not host root (`--uidmap`/`--gidmap`; empty when rootless: the user namespace is implicit).
   */
  userns: string[];
  /** True when podman has a CDI spec for `nvidia.com/gpu`: kind 6 containers get `--device nvidia.com/gpu=all`. */
  gpu: boolean;
  /** Why each choice was made, or why the runner is unavailable, one sentence each. */
  reasons: string[];
}

/** The host ids container ids 0..65535 map to when podman runs as root (a range no Debian user gets). */
export const ROOT_USERNS_BASE = 1_000_000_000;
export const USERNS_SIZE = 65_536;

export interface DetectOptions {
  podman?: string;
  /** CDI spec directories (tests point this at their own). */
  cdiDirs?: readonly string[];
  /** `nvidia-ctk` (its `cdi list` is asked first when present). */
  nvidiaCtk?: string;
}

function exec(program: string, args: string[], timeoutMs = 20_000): Promise<{ ok: boolean; out: string }> {
  return new Promise((resolve) => {
    execFile(program, args, { timeout: timeoutMs, encoding: 'utf8' }, (err, stdout, stderr) =>
      resolve({ ok: err === null, out: err === null ? stdout : `${stderr || err.message}`.trim() }),
    );
  });
}

/**
 * True when a CDI spec in `dirs` declares `kind: nvidia.com/gpu` (JSON or YAML specs, as
 * `nvidia-ctk cdi generate` writes them), or `nvidia-ctk cdi list` lists an `nvidia.com/gpu=` device.
 *
 * @example
 * await cdiGpuReady({ cdiDirs: ['/etc/cdi'] }); // { ready: false, reason: 'no CDI spec for nvidia.com/gpu in /etc/cdi' }
 */
export async function cdiGpuReady(options: DetectOptions = {}): Promise<{ ready: boolean; reason: string }> {
  const dirs = options.cdiDirs ?? CDI_SPEC_DIRS;
  const ctk = await exec(options.nvidiaCtk ?? 'nvidia-ctk', ['cdi', 'list'], 10_000);
  if (ctk.ok && /nvidia\.com\/gpu=/.test(ctk.out))
    return { ready: true, reason: 'nvidia-ctk cdi list names nvidia.com/gpu' };
  for (const dir of dirs) {
    const names = await readdir(dir).catch(() => [] as string[]);
    for (const name of names.filter((n) => /\.(json|ya?ml)$/.test(n)).sort()) {
      const text = await readFile(join(dir, name), 'utf8').catch(() => '');
      if (/["']?kind["']?\s*:\s*["']?nvidia\.com\/gpu["']?/.test(text))
        return { ready: true, reason: `CDI spec ${join(dir, name)} declares nvidia.com/gpu` };
    }
  }
  return { ready: false, reason: `no CDI spec for nvidia.com/gpu in ${dirs.join(' or ')}` };
}

interface PodmanInfo {
  host?: {
    cgroupVersion?: string;
    ociRuntime?: { name?: string };
    security?: { rootless?: boolean };
  };
  version?: { Version?: string };
}

/**
 * Probes the host for the `oci` runner: podman's version, cgroup version and rootlessness
 * (`podman info`), which runtime works (crun refuses cgroup v1 hybrid hosts: "cgroups in hybrid
 * mode not supported", so runc there), the user-namespace flags (a mapped range when podman runs
 * as root), and whether NVIDIA GPUs are reachable through CDI. Never throws: an unusable host is
 * `available: false` with the reason.
 *
 * @example
 * const probe = await detectOciRunner();
 * if (!probe.available) console.log(probe.reasons.join('\n'));
 */
export async function detectOciRunner(options: DetectOptions = {}): Promise<OciRunnerProbe> {
  const podman = options.podman ?? 'podman';
  const gpu = await cdiGpuReady(options);
  const info = await exec(podman, ['info', '--format', 'json']);
  if (!info.ok) {
    return {
      available: false,
      podman,
      rootless: false,
      userns: [],
      gpu: false,
      reasons: [`${podman} info failed: ${info.out.slice(0, 300)}`, gpu.reason],
    };
  }
  let parsed: PodmanInfo;
  try {
    parsed = JSON.parse(info.out) as PodmanInfo;
  } catch {
    parsed = {};
  }
  const cgroupVersion = parsed.host?.cgroupVersion === 'v2' ? 'v2' : 'v1';
  const rootless = parsed.host?.security?.rootless === true;
  const reasons: string[] = [];
  const crun = cgroupVersion === 'v2' ? await exec('crun', ['--version']) : { ok: false, out: '' };
  const runc = await exec('runc', ['--version']);
  let runtime: 'crun' | 'runc' | undefined;
  if (crun.ok) {
    runtime = 'crun';
    reasons.push('crun on cgroup v2');
  } else if (runc.ok) {
    runtime = 'runc';
    reasons.push(
      cgroupVersion === 'v1'
        ? 'runc: this host has cgroup v1 (hybrid), where crun refuses ("cgroups in hybrid mode not supported")'
        : 'runc: crun is not installed',
    );
  } else reasons.push('neither crun nor runc answers --version');
  const userns = rootless
    ? []
    : ['--uidmap', `0:${ROOT_USERNS_BASE}:${USERNS_SIZE}`, '--gidmap', `0:${ROOT_USERNS_BASE}:${USERNS_SIZE}`];
  reasons.push(
    rootless
      ? 'rootless podman: container root is the unprivileged user'
      : `podman runs as root: container ids map to host ${ROOT_USERNS_BASE}+ (--uidmap), so container root is not host root`,
  );
  reasons.push(gpu.reason);
  return {
    available: runtime !== undefined,
    podman,
    ...(parsed.version?.Version ? { podmanVersion: parsed.version.Version } : {}),
    ...(runtime ? { runtime } : {}),
    cgroupVersion,
    rootless,
    userns,
    gpu: gpu.ready,
    reasons,
  };
}

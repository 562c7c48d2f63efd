import { execFile } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { CDI_SPEC_DIRS, cdiGpuReady, detectOciRunner, probeLlamaCpp } from '@svc/node-agent';
import { parseArgs, UsageError } from './args.js';
import { runDoctor, type CheckResult, type DoctorCheck } from './doctor-report.js';
import { agentDownloadUrl, fetchServerHealth, serverUrl, type ServerHealth } from './server-info.js';
import { compareVersions, SVC_VERSION } from './version.js';

/** Signed node calls are refused past this skew (docs/node-protocol.md). */
const SKEW_REFUSED_MS = 60_000;
/** Above this the doctor warns: the margin left for a slow network is small. */
const SKEW_WARN_MS = 5_000;
const MIN_NODE = '20.10.0';

/** What the podman check reads of the `oci` runner's host probe (detectOciRunner). */
export interface PodmanProbe {
  available: boolean;
  rootless: boolean;
  podmanVersion?: string;
  reasons: string[];
}

export interface DoctorOptions {
  server: string;
  /** `--upstream`: an OpenAI-compatible base URL whose `/models` must answer. */
  upstream?: string;
  /** `--gguf` given: node-llama-cpp must load. */
  gguf: boolean;
  /** This machine's clock (tests shift it to simulate skew). */
  now?: () => number;
  /** The podman probe (default: the `oci` runner's own, detectOciRunner). */
  probePodman?: () => Promise<PodmanProbe>;
  /** Runs a program, answers its exit status and output (tests replace it). */
  exec?: (program: string, args: string[]) => Promise<{ ok: boolean; out: string }>;
  /** Where NVIDIA's driver lists GPUs, and where CDI specs live (default: the oci runner's CDI_SPEC_DIRS). */
  nvidiaDir?: string;
  cdiDirs?: readonly string[];
}

function execProgram(program: string, args: string[]): Promise<{ ok: boolean; out: string }> {
  return new Promise((resolve) => {
    execFile(program, args, { timeout: 20_000, encoding: 'utf8' }, (err, stdout, stderr) =>
      resolve({ ok: err === null, out: (err === null ? stdout : stderr || err.message).trim() }),
    );
  });
}

function nodeCheck(): DoctorCheck {
  return {
    name: 'node',
    required: true,
    run: async () =>
      compareVersions(process.versions.node, MIN_NODE) >= 0
        ? { status: 'ok', detail: `Node.js ${process.version} (${MIN_NODE} or later needed)` }
        : {
            status: 'fail',
            detail: `Node.js ${process.version} is older than ${MIN_NODE}`,
            fix: "install Node.js 20 LTS or later (https://nodejs.org, or your distribution's nodejs package)",
          },
  };
}

function serverCheck(server: string, health: () => Promise<ServerHealth>): DoctorCheck {
  return {
    name: 'server',
    required: true,
    run: async (): Promise<CheckResult> => {
      let h: ServerHealth;
      try {
        h = await health();
      } catch (err) {
        const cause = err instanceof Error && err.cause instanceof Error ? err.cause.message : String(err);
        return {
          status: 'fail',
          detail: `no answer from ${server} (${cause})`,
          fix: 'check --server, that svc serve runs there, and that this machine reaches it (firewall, proxy, DNS)',
        };
      }
      if (h.status !== 200 || !h.ok)
        return {
          status: 'fail',
          detail: `${server} answered ${h.status} to GET /api/v1/health${h.version ? '' : ' without a version: is it an SVC server?'}`,
          fix: 'check --server points at the SVC control plane; its operator sees the store error in its log',
        };
      const detail = `${server} answers (svc ${h.version ?? 'unknown'}, ${h.roundTripMs} ms)`;
      if (h.version !== undefined && compareVersions(h.version, SVC_VERSION) > 0)
        return {
          status: 'warn',
          detail: `${detail}; this agent is ${SVC_VERSION}`,
          fix: `update the agent: npm install -g ${agentDownloadUrl(server, h.version)}`,
        };
      return { status: 'ok', detail };
    },
  };
}

function clockCheck(health: () => Promise<ServerHealth>): DoctorCheck {
  const fix = 'turn on time synchronisation (timedatectl set-ntp true, or chrony/ntpd) and check the time zone';
  return {
    name: 'clock',
    required: true,
    run: async (): Promise<CheckResult> => {
      const h = await health().catch(() => undefined);
      if (h?.skewMs === undefined)
        return { status: 'skip', detail: 'cannot compare: the server did not answer with a Date header' };
      const seconds = Math.abs(h.skewMs) / 1000;
      const detail = `${seconds.toFixed(1)} s ${h.skewMs > 0 ? 'behind' : 'ahead of'} the server (±1 s)`;
      if (Math.abs(h.skewMs) > SKEW_REFUSED_MS)
        return { status: 'fail', detail: `${detail}: signed node calls are refused past 60 s`, fix };
      if (Math.abs(h.skewMs) > SKEW_WARN_MS) return { status: 'warn', detail, fix };
      return { status: 'ok', detail };
    },
  };
}

/** The `oci` runner's prerequisite: podman answering, rootless (container root is then not host root). */
function podmanCheck(probe: () => Promise<PodmanProbe>): DoctorCheck {
  const install = 'install podman (apt install podman) and run the agent as an unprivileged user';
  return {
    name: 'podman',
    required: false,
    run: async (): Promise<CheckResult> => {
      const p = await probe();
      if (!p.available)
        return {
          status: 'fail',
          detail: `no usable podman: ${p.reasons.join('; ')}`,
          fix: `${install} (containers are then off)`,
        };
      const version = p.podmanVersion ? `podman ${p.podmanVersion}` : 'podman';
      if (!p.rootless)
        return {
          status: 'warn',
          detail: `${version} runs as root`,
          fix: 'run the agent as an unprivileged user so podman runs rootless (subuid/subgid ranges in /etc/subuid, /etc/subgid)',
        };
      return { status: 'ok', detail: `${version}, rootless` };
    },
  };
}

function imagesCheck(exec: NonNullable<DoctorOptions['exec']>): DoctorCheck {
  return {
    name: 'images',
    required: false,
    run: async (): Promise<CheckResult> => {
      const list = await exec('podman', ['image', 'ls', '--format', '{{.Repository}}:{{.Tag}}']);
      if (!list.ok) return { status: 'skip', detail: 'podman cannot list images (see the podman check)' };
      const images = list.out.split('\n').filter((line) => line !== '' && !line.startsWith('<none>'));
      if (images.length === 0)
        return {
          status: 'fail',
          detail: 'no container images present: container jobs would pull each image first',
          fix: 'pull the images you will run, e.g. podman pull docker.io/library/python:3.12-slim',
        };
      const shown = images.slice(0, 5).join(', ');
      return { status: 'ok', detail: `${images.length} present (${shown}${images.length > 5 ? ', ...' : ''})` };
    },
  };
}

function gpuCheck(options: { nvidiaDir: string; cdiDirs: readonly string[] }): DoctorCheck {
  return {
    name: 'gpu',
    required: false,
    run: async (): Promise<CheckResult> => {
      const gpusDir = `${options.nvidiaDir}/gpus`;
      const gpus = existsSync(gpusDir) ? readdirSync(gpusDir) : [];
      if (gpus.length === 0) return { status: 'skip', detail: 'no NVIDIA GPU found (CPU work only)' };
      // The oci runner's own test: kind 6 containers get the GPUs only through this CDI spec.
      const cdi = await cdiGpuReady({ cdiDirs: options.cdiDirs });
      if (cdi.ready) return { status: 'ok', detail: `${gpus.length} NVIDIA GPU(s); ${cdi.reason}` };
      return {
        status: 'fail',
        detail: `${gpus.length} NVIDIA GPU(s), but ${cdi.reason}: containers cannot use them`,
        fix: 'install the NVIDIA Container Toolkit and run: sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml',
      };
    },
  };
}

function engineCheck(options: Pick<DoctorOptions, 'upstream' | 'gguf'>): DoctorCheck {
  return {
    name: 'engine',
    required: options.upstream !== undefined || options.gguf,
    run: async (): Promise<CheckResult> => {
      if (options.upstream !== undefined) {
        const url = serverUrl(options.upstream, '/models');
        const res = await fetch(url, { signal: AbortSignal.timeout(10_000) }).catch((err: unknown) => err);
        if (!(res instanceof Response) || !res.ok)
          return {
            status: 'fail',
            detail: `${url} ${res instanceof Response ? `answered ${res.status}` : 'did not answer'}`,
            fix: 'start the engine (ollama serve, vllm serve, llama-server) or fix --upstream (include /v1)',
          };
        await res.body?.cancel();
      }
      if (options.gguf) {
        const probe = await probeLlamaCpp();
        if (!probe.available)
          return {
            status: 'fail',
            detail: `node-llama-cpp does not load: ${probe.reason}`,
            fix: 'npm install -g node-llama-cpp (beside svc), or serve the model through --upstream',
          };
      }
      if (options.upstream === undefined && !options.gguf)
        return { status: 'skip', detail: 'no engine named (give --upstream or --gguf to check one)' };
      return {
        status: 'ok',
        detail: [options.upstream && `${options.upstream} answers /models`, options.gguf && 'node-llama-cpp loads']
          .filter(Boolean)
          .join(', '),
      };
    },
  };
}

/**
 * The checks of `svc node doctor`, in the order they print: Node.js, the server, the clock,
 * podman, images, GPUs and CDI, the engine. The server is asked once for both of its checks.
 *
 * @example
 * const code = await runDoctor(doctorChecks({ server: 'https://svc.example', gguf: false }), console.log);
 */
export function doctorChecks(options: DoctorOptions): DoctorCheck[] {
  const exec = options.exec ?? execProgram;
  let asked: Promise<ServerHealth> | undefined;
  const health = () => (asked ??= fetchServerHealth(options.server, options.now ? { now: options.now } : {}));
  return [
    nodeCheck(),
    serverCheck(options.server, health),
    clockCheck(health),
    podmanCheck(options.probePodman ?? (() => detectOciRunner())),
    imagesCheck(exec),
    gpuCheck({
      nvidiaDir: options.nvidiaDir ?? '/proc/driver/nvidia',
      cdiDirs: options.cdiDirs ?? CDI_SPEC_DIRS,
    }),
    engineCheck(options),
  ];
}

/**
 * `svc node doctor`: one line per check, exit 0 when every required check passes, 1 when one
 * fails, 2 on bad usage.
 *
 * @example
 * process.exitCode = await doctor(['--server', 'https://svc.example']);
 */
export async function doctor(argv: string[]): Promise<number> {
  // --api-key and --data-dir are taken (and unused) so that a node's first flags can be reused as they are.
  const args = parseArgs(argv, { values: ['server', 'upstream', 'gguf', 'api-key', 'data-dir'], booleans: [] });
  const server = typeof args.flags.server === 'string' ? args.flags.server : undefined;
  if (server === undefined) throw new UsageError('--server URL is required (the control plane to check against)');
  if (!URL.canParse(server) || !/^https?:$/.test(new URL(server).protocol))
    throw new UsageError(`--server must be an http(s) URL, got '${server}'`);
  const upstream = typeof args.flags.upstream === 'string' ? args.flags.upstream : undefined;
  if (upstream !== undefined && !URL.canParse(upstream))
    throw new UsageError(`--upstream must be an http(s) URL, got '${upstream}'`);
  const checks = doctorChecks({ server, ...(upstream ? { upstream } : {}), gguf: (args.multi.gguf ?? []).length > 0 });
  return runDoctor(checks, (line) => process.stdout.write(`${line}\n`));
}

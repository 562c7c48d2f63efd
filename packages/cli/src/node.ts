import { existsSync } from 'node:fs';
import { availableParallelism, totalmem } from 'node:os';
import { resolve } from 'node:path';
import {
  ControlPlaneError,
  createLlamaCppEngine,
  createNodeAgent,
  createOpenAIUpstreamEngine,
  detectOciRunner,
  IdentityError,
  imageExists,
  loadImageArchive,
  type AgentEvent,
  type Engine,
  type EngineSet,
} from '@svc/node-agent';
import { findModel, MODELS } from '@svc/protocol';
import { parseArgs, UsageError, type ParsedArgs } from './args.js';
import { serverUrl } from './server-info.js';

/** The validated configuration of `svc node`. */
export interface NodeConfig {
  server: string;
  apiKey: string;
  dataDir: string;
  country?: string;
  region?: string;
  name?: string;
  concurrency: number;
  allowProcessRunner: boolean;
  /** Open the node channel when the server offers it (false with `--no-channel`: the HTTP long-poll only). */
  channel: boolean;
  capsule?: { program: string; args: string[]; env: Record<string, string> };
  /** Kinds 8 and 10: the operator's program for each (`--runner 8=CMD`). */
  captureRunners?: Map<number, { program: string; args: string[] }>;
  upstream?: { baseUrl: string; apiKey?: string; models: Map<string, string> };
  gguf: Map<string, string>;
  tee?: { vcekFile?: string; tdxCollateralDir?: string };
  /** The longest wait between two tries of an upload or a poll (`SVC_NODE_RETRY_CAP_MS`; default 30 s). */
  retryCapMs?: number;
  /** OCI archives loaded into podman for the `oci` runner (`--image FILE`), and its ceilings. */
  images: string[];
  maxMemoryMb: number;
  maxCpus: number;
  /** Jobs asking for `network: "egress"` get a network in their container (`--allow-job-network`). */
  allowJobNetwork: boolean;
}

const VALUES = [
  'server',
  'api-key',
  'data-dir',
  'country',
  'region',
  'upstream',
  'upstream-key',
  'model',
  'gguf',
  'concurrency',
  'name',
  'tee-vcek',
  'tee-collateral',
  'capsule',
  'capsule-arg',
  'runner',
  'image',
  'max-memory',
  'max-cpus',
];
const REPEATABLE = new Set(['model', 'gguf', 'capsule-arg', 'runner', 'image']);

/** `--max-memory`: megabytes, or a number with `m`/`g` (e.g. `512m`, `2g`). */
function memoryMb(value: string | undefined): number {
  if (value === undefined) return Math.max(64, Math.floor(totalmem() / 2 ** 20 / 2));
  const m = /^(\d+(?:\.\d+)?)([mg]?)$/i.exec(value.trim());
  const mb = m ? Number(m[1]) * (m[2]?.toLowerCase() === 'g' ? 1024 : 1) : Number.NaN;
  if (!Number.isFinite(mb) || mb < 16)
    throw new UsageError(`--max-memory must be at least 16m (e.g. 512m or 2g), got '${value}'`);
  return Math.floor(mb);
}

function maxCpus(value: string | undefined): number {
  if (value === undefined) return availableParallelism();
  const n = Number(value);
  if (!/^\d+(\.\d+)?$/.test(value) || n < 0.1 || n > 1024)
    throw new UsageError(`--max-cpus must be a number of CPUs from 0.1 (e.g. 2 or 0.5), got '${value}'`);
  return n;
}

/** `--runner KIND=CMD`, each: kind 8 or 10, CMD split on spaces into a program and its arguments. */
function captureRunners(specs: readonly string[]): Map<number, { program: string; args: string[] }> | undefined {
  const runners = new Map<number, { program: string; args: string[] }>();
  for (const spec of specs) {
    const eq = spec.indexOf('=');
    const kind = Number(spec.slice(0, eq));
    const [program = '', ...args] = spec
      .slice(eq + 1)
      .split(' ')
      .filter((part) => part !== '');
    if (eq <= 0 || (kind !== 8 && kind !== 10) || program === '')
      throw new UsageError(`--runner must be 8=CMD or 10=CMD (kinds 8 and 10 process capture sets), got '${spec}'`);
    if (runners.has(kind)) throw new UsageError(`--runner ${kind} is given more than once`);
    const path = program.includes('/') ? resolve(program) : program;
    if (path.includes('/') && !existsSync(path)) throw new UsageError(`--runner ${kind}: no program at ${path}`);
    runners.set(kind, { program: path, args });
  }
  return runners.size > 0 ? runners : undefined;
}

function httpUrl(flag: string, value: string): string {
  let url: URL | undefined;
  try {
    url = new URL(value);
  } catch {
    url = undefined;
  }
  if (url === undefined || (url.protocol !== 'http:' && url.protocol !== 'https:'))
    throw new UsageError(`--${flag} must be an http(s) URL, got '${value}'`);
  return value;
}

function catalogueId(flag: string, id: string): string {
  if (findModel(id) === undefined)
    throw new UsageError(`--${flag}: '${id}' is not a catalogue model (one of: ${MODELS.map((m) => m.id).join(', ')})`);
  return id;
}

/** Upload and poll retries capped at `capMs` (the first waits at most half a second, or `capMs` if less). */
function retryTiming(capMs: number) {
  return {
    uploadBackoff: { baseMs: Math.min(500, capMs), capMs },
    pollBackoff: { baseMs: Math.min(1_000, capMs), capMs },
  };
}

/** `SVC_NODE_RETRY_CAP_MS`: a whole number of milliseconds from 100 to 300,000, or undefined when unset. */
function retryCap(raw: string | undefined): number | undefined {
  if (raw === undefined || raw === '') return undefined;
  const ms = /^\d+$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isInteger(ms) || ms < 100 || ms > 300_000)
    throw new UsageError(
      `SVC_NODE_RETRY_CAP_MS must be a whole number of milliseconds from 100 to 300000, got '${raw}'`,
    );
  return ms;
}

/**
 * Validates `svc node` flags (and the two key variables); any problem is a {@link UsageError}
 * with a message naming the flag.
 *
 * @example
 * parseNodeFlags(parseArgs(['--server', 'https://svc.example', '--api-key', 'k', '--allow-process-runner'], spec), {});
 */
export function parseNodeFlags(args: ParsedArgs, env: NodeJS.ProcessEnv): NodeConfig {
  if (args.positionals.length > 0) throw new UsageError(`unexpected argument '${args.positionals[0] ?? ''}'`);
  for (const [flag, values] of Object.entries(args.multi)) {
    if (values.length > 1 && !REPEATABLE.has(flag)) throw new UsageError(`--${flag} is given more than once`);
  }
  const flag = (name: string): string | undefined =>
    typeof args.flags[name] === 'string' ? args.flags[name] : undefined;
  const server = flag('server');
  if (server === undefined)
    throw new UsageError('--server URL is required (the control plane, e.g. https://svc.example.com)');
  httpUrl('server', server);
  const apiKey = flag('api-key') ?? env.SVC_NODE_API_KEY;
  if (!apiKey) throw new UsageError('--api-key KEY is required (an operator-scoped API key; or set SVC_NODE_API_KEY)');

  const country = flag('country');
  if (country !== undefined && !/^[A-Z]{2}$/.test(country))
    throw new UsageError(`--country must be two upper-case letters (ISO 3166-1 alpha-2, e.g. CA), got '${country}'`);
  const region = flag('region');
  if (region !== undefined && !/^[a-z0-9-]{1,64}$/.test(region))
    throw new UsageError(
      `--region must be 1 to 64 lower-case letters, digits or '-' (e.g. ca-central), got '${region}'`,
    );
  const name = flag('name');
  if (name !== undefined && (name.trim() === '' || name.length > 100))
    throw new UsageError('--name must be 1 to 100 characters');
  const rawConcurrency = flag('concurrency') ?? '1';
  const concurrency = /^\d+$/.test(rawConcurrency) ? Number(rawConcurrency) : Number.NaN;
  if (!Number.isInteger(concurrency) || concurrency < 1 || concurrency > 16)
    throw new UsageError(`--concurrency must be a whole number from 1 to 16, got '${rawConcurrency}'`);

  const served = new Set<string>();
  const claim = (id: string) => {
    if (served.has(id))
      throw new UsageError(`model '${id}' is given more than once (--model and --gguf together name each model once)`);
    served.add(id);
  };
  const upstreamModels = new Map<string, string>();
  for (const spec of args.multi.model ?? []) {
    const eq = spec.indexOf('=');
    const id = catalogueId('model', eq === -1 ? spec : spec.slice(0, eq));
    const engineModel = eq === -1 ? id : spec.slice(eq + 1);
    if (engineModel === '') throw new UsageError(`--model ${spec}: the engine model after '=' is empty`);
    claim(id);
    upstreamModels.set(id, engineModel);
  }
  const gguf = new Map<string, string>();
  for (const spec of args.multi.gguf ?? []) {
    const eq = spec.indexOf('=');
    if (eq <= 0 || eq === spec.length - 1) throw new UsageError(`--gguf must be CATALOG_ID=PATH, got '${spec}'`);
    const id = catalogueId('gguf', spec.slice(0, eq));
    const type = findModel(id)?.type;
    if (type !== 'chat' && type !== 'embeddings')
      throw new UsageError(
        `--gguf: ${id} is a ${type ?? 'unknown'} model; GGUF files serve chat and embeddings models only`,
      );
    const path = resolve(spec.slice(eq + 1));
    if (!existsSync(path)) throw new UsageError(`--gguf ${id}: no file at ${path}`);
    claim(id);
    gguf.set(id, path);
  }

  const upstreamUrl = flag('upstream');
  const upstreamKey = flag('upstream-key') ?? env.SVC_UPSTREAM_API_KEY;
  if (upstreamUrl === undefined && upstreamModels.size > 0)
    throw new UsageError('--model needs --upstream BASE_URL (the OpenAI-compatible server that runs it)');
  if (upstreamUrl !== undefined && upstreamModels.size === 0)
    throw new UsageError('--upstream needs at least one --model CATALOG_ID[=ENGINE_MODEL]');
  if (upstreamUrl === undefined && flag('upstream-key') !== undefined)
    throw new UsageError('--upstream-key needs --upstream');
  const allowProcessRunner = args.flags['allow-process-runner'] === true;
  const channel = args.flags['no-channel'] !== true;
  const capsuleProgram = flag('capsule');
  if (capsuleProgram === undefined && (args.multi['capsule-arg'] ?? []).length > 0)
    throw new UsageError('--capsule-arg needs --capsule PROGRAM');
  const capsuleEnv = Object.fromEntries(
    Object.entries(env).flatMap(([k, v]) =>
      k.startsWith('SVC_CAPSULE_') && k.length > 12 && v !== undefined ? [[k.slice(12), v]] : [],
    ),
  );
  const capsule =
    capsuleProgram === undefined
      ? undefined
      : {
          program: capsuleProgram.includes('/') ? resolve(capsuleProgram) : capsuleProgram,
          args: args.multi['capsule-arg'] ?? [],
          env: capsuleEnv,
        };
  if (capsule && capsule.program.includes('/') && !existsSync(capsule.program))
    throw new UsageError(`--capsule: no program at ${capsule.program}`);
  const runners = captureRunners(args.multi.runner ?? []);
  const images = (args.multi.image ?? []).map((file) => resolve(file));
  for (const file of images) if (!existsSync(file)) throw new UsageError(`--image: no OCI archive at ${file}`);
  if (served.size === 0 && !allowProcessRunner && !capsule && !runners && images.length === 0) {
    throw new UsageError(
      'nothing to serve: give --upstream with --model, --gguf, --image, --allow-process-runner, --capsule or --runner',
    );
  }
  const retryCapMs = retryCap(env.SVC_NODE_RETRY_CAP_MS);
  return {
    server,
    apiKey,
    dataDir: resolve(flag('data-dir') ?? './.svc-node'),
    ...(retryCapMs === undefined ? {} : { retryCapMs }),
    ...(country === undefined ? {} : { country }),
    ...(region === undefined ? {} : { region }),
    ...(name === undefined ? {} : { name }),
    concurrency,
    allowProcessRunner,
    channel,
    ...(capsule ? { capsule } : {}),
    ...(runners ? { captureRunners: runners } : {}),
    ...(upstreamUrl === undefined
      ? {}
      : {
          upstream: {
            baseUrl: httpUrl('upstream', upstreamUrl),
            ...(upstreamKey ? { apiKey: upstreamKey } : {}),
            models: upstreamModels,
          },
        }),
    gguf,
    images,
    allowJobNetwork: args.flags['allow-job-network'] === true,
    maxMemoryMb: memoryMb(flag('max-memory')),
    maxCpus: maxCpus(flag('max-cpus')),
    ...(flag('tee-vcek') === undefined && flag('tee-collateral') === undefined
      ? {}
      : {
          tee: {
            ...(flag('tee-vcek') === undefined ? {} : { vcekFile: resolve(flag('tee-vcek') ?? '') }),
            ...(flag('tee-collateral') === undefined
              ? {}
              : { tdxCollateralDir: resolve(flag('tee-collateral') ?? '') }),
          },
        }),
  };
}

async function buildEngines(config: NodeConfig): Promise<EngineSet> {
  const engines: EngineSet = new Map();
  if (config.upstream) {
    const engine = createOpenAIUpstreamEngine(config.upstream);
    for (const id of config.upstream.models.keys()) engines.set(id, engine);
  }
  if (config.gguf.size > 0) {
    const engine = await createLlamaCppEngine({ models: config.gguf });
    for (const id of config.gguf.keys()) engines.set(id, engine);
  }
  return engines;
}

/**
 * `ConfigResponse.default_runner_image` of the server, unless it names none (`process`) or the
 * server does not answer now (the node then runs without it: registration retries on its own).
 */
async function platformDefaultImage(server: string, apiKey: string): Promise<string | undefined> {
  try {
    // config:read, which the operator key carries.
    const res = await fetch(serverUrl(server, '/api/v1/config'), {
      headers: { authorization: `Bearer ${apiKey}` },
      signal: AbortSignal.timeout(10_000),
    });
    const ref = res.ok ? ((await res.json()) as { default_runner_image?: unknown }).default_runner_image : undefined;
    return typeof ref === 'string' && ref !== '' && ref !== 'process' ? ref : undefined;
  } catch {
    return undefined;
  }
}

function logEvent(event: AgentEvent): void {
  if (event.event === 'work' || event.event === 'attested')
    process.stdout.write(`${JSON.stringify({ time: new Date().toISOString(), ...event })}\n`);
  else if (event.event === 'warning')
    process.stderr.write(`svc node: warning: ${event.work_id ? `${event.work_id}: ` : ''}${event.message}\n`);
}

/**
 * `svc node`: exit 0 after a clean stop, 1 when registration or an engine fails, 2 on bad usage.
 *
 * @example
 * process.exitCode = await node(['--server', 'https://svc.example', '--allow-process-runner']);
 */
export async function node(argv: string[]): Promise<number> {
  const config = parseNodeFlags(
    parseArgs(argv, { values: VALUES, booleans: ['allow-process-runner', 'allow-job-network', 'no-channel'] }),
    process.env,
  );
  let engines: EngineSet;
  try {
    engines = await buildEngines(config);
  } catch (err) {
    process.stderr.write(`svc node: cannot start an engine: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  }
  let oci: Parameters<typeof createNodeAgent>[0]['oci'];
  const platformImage = await platformDefaultImage(config.server, config.apiKey);
  const probe = config.images.length > 0 || platformImage !== undefined ? await detectOciRunner() : undefined;
  if (config.images.length > 0 && probe && !probe.available) {
    process.stderr.write(`svc node: the oci runner cannot run here: ${probe.reasons.join('; ')}\n`);
    return 1;
  }
  if (probe?.available) {
    const images: string[] = [];
    try {
      for (const file of config.images) images.push(...(await loadImageArchive(probe.podman, file)));
    } catch (err) {
      process.stderr.write(`svc node: ${err instanceof Error ? err.message : String(err)}\n`);
      return 1;
    }
    // DESIGN.md section 8: the first image loaded is the node's default; the platform's only when
    // podman holds it (pulled or loaded before), declared too so jobs naming it can come here.
    const held = platformImage !== undefined && (await imageExists(probe.podman, platformImage));
    if (held && platformImage !== undefined && !images.includes(platformImage)) images.push(platformImage);
    if (images.length > 0)
      oci = {
        probe,
        images: [...new Set(images)],
        ...(held ? { defaultImage: platformImage } : {}),
        maxMemoryMb: config.maxMemoryMb,
        maxCpus: config.maxCpus,
        allowNetwork: config.allowJobNetwork,
      };
  }
  if (!oci && !config.allowProcessRunner && (config.capsule || config.captureRunners)) {
    process.stderr.write(
      "svc node: --capsule and --runner run in the oci runner (--image FILE, or the platform's default_runner_image held by podman) or on the host with --allow-process-runner: give one\n",
    );
    return 2;
  }
  const agent = createNodeAgent({
    server: config.server,
    apiKey: config.apiKey,
    dataDir: config.dataDir,
    engines,
    concurrency: config.concurrency,
    allowProcessRunner: config.allowProcessRunner,
    ...(oci ? { oci } : {}),
    channel: config.channel,
    ...(config.capsule ? { capsule: config.capsule } : {}),
    ...(config.captureRunners ? { captureRunners: config.captureRunners } : {}),
    ...(config.country === undefined ? {} : { country: config.country }),
    ...(config.region === undefined ? {} : { region: config.region }),
    ...(config.name === undefined ? {} : { name: config.name }),
    ...(config.tee === undefined ? {} : { tee: config.tee }),
    ...(config.retryCapMs === undefined ? {} : { timing: retryTiming(config.retryCapMs) }),
    onEvent: logEvent,
  });
  let stopRequested = false;
  let onStopped: () => void = () => undefined;
  const stopped = new Promise<void>((resolveStopped) => (onStopped = resolveStopped));
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopRequested) {
      process.stderr.write(`svc node: ${signal} again: exiting without waiting for running work\n`);
      process.exit(130);
    }
    stopRequested = true;
    process.stderr.write(`svc node: ${signal}: no new work; letting running work finish (up to 30 s)\n`);
    void agent.stop().then(onStopped);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  try {
    const registered = await agent.start();
    const models = [...engines.keys()].sort();
    process.stdout.write(
      `svc node: registered ${registered.node_id} with ${config.server} (country ${config.country ?? 'not declared'}, models ${models.join(', ') || 'none'}` +
        `${oci ? `, oci runner (podman ${oci.probe.runtime ?? ''}) with ${oci.images.join(', ')}` : ''}${config.allowProcessRunner ? ', process runner on' : ''}${config.capsule ? `, capsule ${config.capsule.program}` : ''}` +
        `${[...(config.captureRunners?.entries() ?? [])].map(([kind, r]) => `, kind ${kind} runner ${r.program}`).join('')})\n`,
    );
    await stopped;
    return 0;
  } catch (err) {
    if (stopRequested) return 0;
    if (err instanceof ControlPlaneError) {
      process.stderr.write(
        `svc node: registration with ${config.server} failed: ${err.status || 'no answer'} ${err.error}: ${err.message}\n`,
      );
      return 1;
    }
    if (err instanceof IdentityError) {
      process.stderr.write(`svc node: ${err.message}\n`);
      return 1;
    }
    throw err;
  } finally {
    process.off('SIGTERM', onSignal);
    process.off('SIGINT', onSignal);
    await agent.stop({ graceMs: 0 });
    await Promise.allSettled([...new Set<Engine>(engines.values())].map((engine) => engine.close()));
  }
}

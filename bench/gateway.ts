/**
 * What the gateway adds on top of the engine it fronts: the same OpenAI requests sent straight to
 * a fast local OpenAI-compatible upstream (the test server, no artificial delay) and through
 * `svc serve` + `svc node` (real processes; the node's engine is that upstream), in one run.
 * Reports added latency (p50/p99) for non-streamed chat, time to first token for streamed chat,
 * and requests/second under concurrency with the through/direct ratio, beside a bare relay of the
 * same processes (bench/relay.ts). `--baseline <checkout>` runs a second svc pair from another
 * checkout of the project in the same run. `--portkey <dir>` adds Portkey's gateway, installed in
 * `<dir>` outside this repository, over the same upstream. Targets take turns request by request
 * (and second by second under load), so a machine whose speed drifts affects them alike.
 * `--store postgres` runs the svc targets on PostgreSQL: the cluster DATABASE_URL names, or a
 * throwaway one (bench/postgres.ts) removed at the end. See bench/README.md.
 *
 * @example
 * npx tsx bench/gateway.ts --requests 300 --duration 10 --concurrency 16
 * npx tsx bench/gateway.ts --baseline /tmp/svc-at-main
 * npx tsx bench/gateway.ts --portkey /tmp/portkey-bench   # its install: bench/README.md, Gateway
 * npx tsx bench/gateway.ts --warmup 1000 --warmup-load 0   # as it warmed up before 2026-11-27 (fourth session)
 * npx tsx bench/gateway.ts --baseline . --env SVC_WRITER_FLUSH_MS=50 --baseline-env SVC_WRITER_FLUSH_MS=2
 * npx tsx bench/gateway.ts --store postgres   # a throwaway PostgreSQL cluster
 * DATABASE_URL=postgres://... npx tsx bench/gateway.ts
 */
import { execFileSync, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { availableParallelism, cpus } from 'node:os';
import { parseArgs } from 'node:util';
import { startOpenAITestServer } from '@svc/node-agent/testing';
import type { TestStore } from '@svc/server/testing';
import { join, resolve } from 'node:path';
import type { Db } from '../packages/server/src/platform/db/index.js';
import { createPgliteDb } from '../packages/server/src/platform/db/pglite.js';
import { createPostgresDb } from '../packages/server/src/platform/db/postgres.js';
import { inLoops, positiveInt, printTable, ratio, turnOrder, wholeNumber } from './lib.js';
import { benchStore, STORE_OPTION } from './postgres.js';
import {
  baselineBin,
  envSettings,
  listeningUrl,
  RELAY,
  startSvc,
  stop,
  SVC_BIN,
  svcProcess,
  until,
  type SvcPair,
  type SvcProcess,
} from './svc.js';

const { values } = parseArgs({
  options: {
    requests: { type: 'string', default: '300' },
    duration: { type: 'string', default: '10' },
    concurrency: { type: 'string', default: '16' },
    warmup: { type: 'string', default: '1000' },
    'warmup-load': { type: 'string', default: '4000' },
    baseline: { type: 'string' },
    env: { type: 'string' },
    'baseline-env': { type: 'string' },
    portkey: { type: 'string' },
    store: STORE_OPTION,
  },
});
const requests = positiveInt('requests', values.requests);
const duration = positiveInt('duration', values.duration);
const concurrency = Math.min(16, positiveInt('concurrency', values.concurrency));
const warmup = wholeNumber('warmup', values.warmup);
const warmupLoad = wholeNumber('warmup-load', values['warmup-load']);
const BASELINE_BIN = baselineBin(values.baseline);
const ENV = envSettings('--env', values.env);
const BASELINE_ENV = envSettings('--baseline-env', values['baseline-env']);
const PORTKEY = portkeyInstall(values.portkey);
const STORE = benchStore(values.store);

const MESSAGES = [{ role: 'user', content: 'the quick brown fox jumps over the lazy dog' }];
const CHAT = { model: 'tinyllama', messages: MESSAGES, max_tokens: 16 };

interface Target {
  base: string;
  headers: Record<string, string>;
  /** Its gateway and node processes, whose CPU time the bench reads (Portkey has no node). */
  processes?: { gateway: ChildProcess; node?: ChildProcess };
  /** An svc target's store, read after the run (hand-overs under load). */
  store?: TestStore;
}

/**
 * Portkey's gateway as `--portkey <dir>` installed it (bench/README.md, Gateway: 1.15.2 with
 * `hono` 4.9.7 and `@hono/node-server` 1.13.5): its start script and the versions it runs with,
 * or undefined without the flag. Throws a clear error when `<dir>` has no gateway, or one whose
 * `@hono/node-server` is above 1.14.2: with those its streamed answers fail with
 * `TypeError: immutable` (Portkey-AI/gateway#1389).
 */
function portkeyInstall(dir: string | undefined): { script: string; versions: string } | undefined {
  if (dir === undefined) return undefined;
  const modules = join(resolve(dir), 'node_modules');
  const script = join(modules, '@portkey-ai/gateway/build/start-server.js');
  if (!existsSync(script))
    throw new Error(`--portkey must be a directory where @portkey-ai/gateway is installed; ${script} is missing`);
  // The copy Portkey loads: its own nested one first (npm nests one when the pin misses its range).
  const version = (name: string): string => {
    for (const at of [join(modules, '@portkey-ai/gateway/node_modules', name), join(modules, name)])
      if (existsSync(join(at, 'package.json')))
        return (JSON.parse(readFileSync(join(at, 'package.json'), 'utf8')) as { version: string }).version;
    return 'missing';
  };
  const nodeServer = version('@hono/node-server');
  const [major = 0, minor = 0, patch = 0] = nodeServer.split('.').map(Number);
  if (major !== 1 || minor > 14 || (minor === 14 && patch > 2))
    throw new Error(
      `--portkey: ${dir} runs @hono/node-server ${nodeServer}; Portkey's streams need 1.14.2 or older (pin 1.13.5 with npm overrides, bench/README.md)`,
    );
  const names = ['@portkey-ai/gateway', 'hono', '@hono/node-server'];
  return { script, versions: names.map((name) => `${name} ${version(name)}`).join(', ') };
}

/** A TCP port free on 127.0.0.1 now: Portkey takes `--port=<n>` and prints no port it chose itself. */
function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.once('error', fail);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? done(address.port) : fail(new Error('no port'))));
    });
  });
}

/**
 * Portkey's gateway (`start-server.js --headless`) as a target over the upstream, as its users
 * call an OpenAI-compatible engine: provider `openai`, the upstream as custom host, a key it
 * forwards. One process, no node: it calls the upstream itself.
 */
async function startPortkeyTarget(script: string, upstreamUrl: string, running: SvcProcess[]): Promise<Target> {
  const port = await freePort();
  const gateway = svcProcess(['--headless', `--port=${port}`], {}, [script]);
  running.push(gateway);
  const target: Target = {
    base: `http://127.0.0.1:${port}/v1`,
    headers: {
      'x-portkey-provider': 'openai',
      'x-portkey-custom-host': upstreamUrl,
      authorization: 'Bearer sk-bench',
    },
    processes: { gateway: gateway.child },
  };
  await until(
    "Portkey's gateway answering",
    () =>
      chat(target).then(
        () => true,
        () => undefined,
      ),
    gateway.output,
  );
  return target;
}

/**
 * A target's store as its own server left it. Not `openDb`, which applies this checkout's
 * migrations: on a baseline checkout's store, a migration it does not have would change the
 * schema under its running server (0170 dropped a table the baseline still writes to).
 */
function openAsIs(store: TestStore): Promise<Db> {
  return store.databaseUrl ? createPostgresDb(store.databaseUrl) : createPgliteDb(join(store.dataDir, 'pgdata'));
}

/**
 * Of the chat work items created between `from` and `to`, how many were handed to the node at
 * once (stored already dispatched, in the opening's own statement: `dispatched_at = created_at`)
 * rather than taken from the store by a later poll. Read from the store once its server stopped,
 * so it counts the same way for a baseline checkout that has no counter of its own.
 */
async function handOvers(store: TestStore, from: Date, to: Date): Promise<{ handed: number; total: number }> {
  const db = await openAsIs(store);
  try {
    const { rows } = await db.query<{ handed: number; total: number }>(
      `SELECT count(*) FILTER (WHERE dispatched_at = created_at)::int AS handed, count(*)::int AS total
         FROM work_items WHERE type = 'chat' AND created_at >= $1 AND created_at <= $2`,
      [from, to],
    );
    return rows[0] ?? { handed: 0, total: 0 };
  } finally {
    await db.close();
  }
}

async function chat(t: Target): Promise<void> {
  const res = await fetch(`${t.base}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...t.headers },
    body: JSON.stringify(CHAT),
  });
  const body = (await res.json()) as { choices?: unknown[] };
  if (res.status !== 200 || !body.choices)
    throw new Error(`chat answered ${res.status}: ${JSON.stringify(body).slice(0, 300)}`);
}

/** Time to the first chunk that carries content, in ms; the stream is read to its end. */
async function firstToken(t: Target): Promise<number> {
  const started = performance.now();
  const res = await fetch(`${t.base}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...t.headers },
    body: JSON.stringify({ ...CHAT, stream: true }),
  });
  if (res.status !== 200 || !res.body) throw new Error(`stream answered ${res.status}`);
  let ttft = -1;
  const decoder = new TextDecoder();
  let text = '';
  for await (const part of res.body) {
    text += decoder.decode(part, { stream: true });
    if (ttft < 0 && /"content":"[^"]/.test(text)) ttft = performance.now() - started;
  }
  if (!text.includes('data: [DONE]')) throw new Error('stream ended without [DONE]');
  return ttft;
}

function quantiles(samples: number[]): { p50: number; p99: number } {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
  return { p50: at(0.5), p99: at(0.99) };
}

/** The untimed turns `roundRobin` takes before it measures `n`. */
const untimedTurns = (n: number) => Math.min(50, n);

/**
 * `n` timed runs of each function, taking turns (a, b, c, a, b, c, ...) after 50 untimed turns,
 * so a machine whose speed drifts during the run slows every target alike.
 */
async function roundRobin(n: number, onces: (() => Promise<number>)[]): Promise<{ p50: number; p99: number }[]> {
  for (let i = 0; i < untimedTurns(n); i++) for (const once of onces) await once();
  const samples = onces.map((): number[] => []);
  for (let i = 0; i < n; i++)
    for (const k of turnOrder(i, onces.length)) samples[k]?.push(await (onces[k] as () => Promise<number>)());
  return samples.map(quantiles);
}

/**
 * `n` timed runs of each function in blocks of `block`: the targets take turns block by block
 * (a, a, ..., b, b, ..., a, ...), each block after one untimed run, so a target's processes are
 * warm from the request before, as one client's back-to-back requests find them. Request-by-request
 * turns (`roundRobin`) find every process cold and inflate every hop alike.
 */
async function blockRoundRobin(
  n: number,
  block: number,
  onces: (() => Promise<number>)[],
): Promise<{ p50: number; p99: number }[]> {
  const samples = onces.map((): number[] => []);
  for (let done = 0; done < n; done += block)
    for (const k of turnOrder(done / block, onces.length)) {
      const once = onces[k] as () => Promise<number>;
      await once();
      for (let i = 0; i < Math.min(block, n - done); i++) samples[k]?.push(await once());
    }
  return samples.map(quantiles);
}

const timed = (fn: () => Promise<void>) => async () => {
  const started = performance.now();
  await fn();
  return performance.now() - started;
};

/**
 * Mean requests/second of each function under `workers` loops of back-to-back requests, for
 * `seconds` each after a 2 s warm-up each, the targets taking turns one second at a time.
 */
async function throughputRoundRobin(
  workers: number,
  seconds: number,
  onces: (() => Promise<void>)[],
  measuring?: () => void,
): Promise<{ rps: number; done: number; failed: number; firstFailure?: string; benchCpuMs: number }[]> {
  const run = async (ms: number, once: () => Promise<void>) => {
    const deadline = Date.now() + ms;
    let done = 0;
    let failed = 0;
    let firstFailure: string | undefined;
    await Promise.all(
      Array.from({ length: workers }, async () => {
        while (Date.now() < deadline) {
          try {
            await once();
            done++;
          } catch (err) {
            failed++;
            firstFailure ??= err instanceof Error ? err.message : String(err);
          }
        }
      }),
    );
    return { done, failed, firstFailure };
  };
  for (const once of onces) await run(2_000, once);
  measuring?.();
  const totals = onces.map((): { done: number; failed: number; firstFailure?: string; benchCpuMs: number } => ({
    done: 0,
    failed: 0,
    benchCpuMs: 0,
  }));
  for (let second = 0; second < seconds; second++) {
    for (const k of turnOrder(second, onces.length)) {
      const once = onces[k] as () => Promise<void>;
      // This process is the load generator and the upstream: its CPU during a target's turn is
      // what that target's requests cost on the client's and the engine's side.
      const cpuBefore = process.cpuUsage();
      const r = await run(1_000, once);
      const cpu = process.cpuUsage(cpuBefore);
      const t = totals[k];
      if (t) {
        t.done += r.done;
        t.failed += r.failed;
        t.firstFailure ??= r.firstFailure;
        t.benchCpuMs += (cpu.user + cpu.system) / 1000;
      }
    }
  }
  return totals.map((t) => ({ ...t, rps: t.done / seconds }));
}

const CLOCK_TICKS = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/**
 * CPU time (user and system) a process has used so far, in ms: every thread, or with `mainOnly`
 * its main thread alone (the JavaScript event loop; not PGlite's thread, V8's helper threads or
 * libuv's pool). Undefined off Linux.
 */
function cpuMs(child: ChildProcess | undefined, mainOnly = false): number | undefined {
  if (child?.pid === undefined) return undefined;
  try {
    const path = mainOnly ? `/proc/${child.pid}/task/${child.pid}/stat` : `/proc/${child.pid}/stat`;
    // Fields after the command's closing parenthesis; utime and stime are the 12th and 13th.
    const fields = readFileSync(path, 'utf8').split(') ')[1]?.split(' ') ?? [];
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS;
  } catch {
    return undefined;
  }
}

/**
 * CPU ms so far of the PostgreSQL backends serving `store`'s database, by pid (undefined on
 * PGlite, which runs inside the gateway's process, or off Linux). The cluster's shared processes
 * (WAL writer, checkpointer) are not counted.
 */
async function storeBackendsCpu(store: TestStore | undefined): Promise<Map<number, number> | undefined> {
  if (!store?.databaseUrl || !existsSync('/proc/self/stat')) return undefined;
  const db = await openAsIs(store);
  try {
    const { rows } = await db.query<{ pid: number }>(
      'SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()',
    );
    const out = new Map<number, number>();
    for (const { pid } of rows) {
      const ms = cpuMs({ pid } as ChildProcess);
      if (ms !== undefined) out.set(pid, ms);
    }
    return out;
  } finally {
    await db.close();
  }
}

/** CPU ms the backends of `to` spent since `from` (a backend started meanwhile counts from 0). */
function backendsSpent(from: Map<number, number> | undefined, to: Map<number, number> | undefined): number | undefined {
  if (!from || !to) return undefined;
  let spent = 0;
  for (const [pid, ms] of to) spent += ms - (from.get(pid) ?? 0);
  return spent;
}

/** CPU ms each target's gateway and node spend per request while `run` sends `count` requests to each. */
async function cpuPerRequest<T>(
  targets: Target[],
  count: number,
  run: () => Promise<T>,
): Promise<{ result: T; cpu: { gateway?: number; node?: number }[] }> {
  const read = () => targets.map((t) => ({ gateway: cpuMs(t.processes?.gateway), node: cpuMs(t.processes?.node) }));
  const before = read();
  const result = await run();
  const after = read();
  const per = (a: number | undefined, b: number | undefined) =>
    a === undefined || b === undefined ? undefined : (a - b) / count;
  return {
    result,
    cpu: after.map((a, i) => ({ gateway: per(a.gateway, before[i]?.gateway), node: per(a.node, before[i]?.node) })),
  };
}

/** This checkout's (or `bin`'s) svc pair as a target (bench/svc.ts). */
async function startSvcTarget(
  bin: string,
  upstreamUrl: string,
  running: SvcProcess[],
  cleanups: (() => Promise<void>)[],
  env: Record<string, string>,
): Promise<Target> {
  const target = (pair: SvcPair): Target => ({
    base: `${pair.url}/v1`,
    headers: { authorization: `Bearer ${pair.buyerKey}` },
    processes: { gateway: pair.server.child, node: pair.agent.child },
    store: pair.store,
  });
  return target(await startSvc(bin, upstreamUrl, running, cleanups, (pair) => chat(target(pair)), { env }));
}

const upstream = await startOpenAITestServer();
let loadWindow: { from: Date; to: Date } | undefined;
const running: SvcProcess[] = [];
const svcTargets: Target[] = [];
const portkeyTargets: Target[] = [];
const cleanups: (() => Promise<void>)[] = [];
try {
  // The bare relays (bench/relay.ts): the same three processes and hops, nothing else; over a
  // long-poll (as `svc node` without the channel) and over one WebSocket (as with the channel);
  // and the WebSocket relay with the rules' work between the engine's answer and the buyer's (the
  // node's signed, journaled receipt, verified before the answer leaves).
  const relayOf = (args: string[]) => svcProcess(args, {}, ['--import', 'tsx', RELAY]);
  const relays: Target[] = [];
  for (const [gatewayRole, nodeRole] of [
    ['gateway', 'node'],
    ['gateway-ws', 'node-ws'],
    ['gateway-ws-receipts', 'node-ws-receipts'],
  ] as const) {
    const bareGateway = relayOf([gatewayRole]);
    running.push(bareGateway);
    const relayUrl = await listeningUrl(`the bare relay (${gatewayRole})`, bareGateway);
    const bareNode = relayOf([nodeRole, relayUrl, upstream.url, '16']);
    running.push(bareNode);
    relays.push({
      base: `${relayUrl}/v1`,
      headers: {},
      processes: { gateway: bareGateway.child, node: bareNode.child },
    });
  }
  svcTargets.push(await startSvcTarget(SVC_BIN, upstream.url, running, cleanups, ENV));
  if (BASELINE_BIN) svcTargets.push(await startSvcTarget(BASELINE_BIN, upstream.url, running, cleanups, BASELINE_ENV));
  // The upstream's URL ends in /v1, as Portkey's custom host must.
  if (PORTKEY) portkeyTargets.push(await startPortkeyTarget(PORTKEY.script, upstream.url, running));
  const direct: Target = { base: upstream.url, headers: {} };
  for (const wsRelay of relays.slice(1))
    await until(
      'the WebSocket relay node connecting',
      () =>
        chat(wsRelay).then(
          () => true,
          () => undefined,
        ),
      () => '',
    );
  const others = [...relays, ...svcTargets, ...portkeyTargets];
  // The targets that stream (the bare relays do not), in the order of `others`.
  const streamers = [...svcTargets, ...portkeyTargets];
  // A gateway runs for days: warm the processes up so the figures are the steady state, not the
  // first minute. V8 keeps optimizing svc's code for thousands of requests, and the paths a
  // loaded server takes (a flush of many requests, a node with every slot busy) only under load:
  // one request at a time first, then from the loops, each target alone.
  for (let i = 0; i < warmup; i++) for (const t of others) await chat(t);
  for (const t of others) await inLoops(concurrency, warmupLoad, () => chat(t));

  console.log(
    `node ${process.version}, ${availableParallelism()} CPUs (${cpus()[0]?.model ?? 'unknown'}), store ${STORE.label}; svc serve and svc node as separate processes`,
  );
  if (BASELINE_BIN) console.log(`baseline: ${BASELINE_BIN}, its own svc serve and svc node beside this checkout's`);
  if (PORTKEY)
    console.log(
      `portkey: ${PORTKEY.versions}, one process (--headless) calling the upstream itself; its CPU is that process's`,
    );
  for (const [who, env] of [
    ['svc', ENV],
    ['baseline', BASELINE_ENV],
  ] as const)
    if (Object.keys(env).length > 0)
      console.log(
        `${who}'s svc serve with ${Object.entries(env)
          .map(([k, v]) => `${k}=${v}`)
          .join(' ')}`,
      );
  console.log(
    `warm-up: ${warmup} requests through each one at a time, then ${warmupLoad} from ${concurrency} loops; latency: ${requests} sequential requests each, the targets taking turns request by request, then again in blocks of 50 (warm); throughput: ${concurrency} concurrent requests, ${duration}s each in 1 s turns after 2s warm-up`,
  );
  console.log(
    'upstream: the OpenAI test server in this process (echo model, no added delay; streams one word per chunk, 1 ms apart)\n',
  );
  const measured = await cpuPerRequest(others, requests + untimedTurns(requests), () =>
    roundRobin(
      requests,
      [direct, ...others].map((t) => timed(() => chat(t))),
    ),
  );
  const [latDirect, ...latOthers] = measured.result;
  const [warmDirect, ...warmOthers] = await blockRoundRobin(
    requests,
    50,
    [direct, ...others].map((t) => timed(() => chat(t))),
  );
  const [ttftDirect, ...ttftStreamers] = await roundRobin(
    requests,
    [direct, ...streamers].map((t) => () => firstToken(t)),
  );
  const loadFrom = new Date();
  // CPU under load: each target's processes from the end of the warm-ups to the end of the turns
  // (their idle time during the other targets' turns included, so work left after a turn counts),
  // per request that target answered.
  const readCpu = () =>
    others.map((t) => ({
      gateway: cpuMs(t.processes?.gateway),
      main: cpuMs(t.processes?.gateway, true),
      node: cpuMs(t.processes?.node),
    }));
  let cpuFrom = readCpu();
  const storeCpu = () => Promise.all(others.map((t) => storeBackendsCpu(t.store)));
  let storeFrom = await storeCpu();
  let measuring: Promise<void> | undefined;
  const [tDirect, ...tOthers] = await throughputRoundRobin(
    concurrency,
    duration,
    [direct, ...others].map((t) => () => chat(t)),
    () => {
      cpuFrom = readCpu();
      measuring = storeCpu().then((s) => void (storeFrom = s));
    },
  );
  await measuring;
  const cpuTo = readCpu();
  const storeTo = await storeCpu();
  const loadTo = new Date();
  const loadedCpu = cpuTo.map((a, i) => {
    const done = tOthers[i]?.done ?? 0;
    const per = (x: number | undefined, y: number | undefined) =>
      x === undefined || y === undefined || done === 0 ? undefined : (x - y) / done;
    return {
      gateway: per(a.gateway, cpuFrom[i]?.gateway),
      main: per(a.main, cpuFrom[i]?.main),
      node: per(a.node, cpuFrom[i]?.node),
      bench: done === 0 ? undefined : (tOthers[i]?.benchCpuMs ?? 0) / done,
      store: per(backendsSpent(storeFrom[i], storeTo[i]), 0),
    };
  });
  if (!latDirect || !ttftDirect || !tDirect) throw new Error('a measurement is missing');
  const ms = (n: number) => n.toFixed(2);
  const names = [
    'bare relay',
    'bare relay ws',
    'relay ws + receipts',
    ...svcTargets.map((_, i) => (i === 0 ? 'via svc' : 'via baseline')),
    ...portkeyTargets.map(() => 'via portkey'),
  ];
  const row = (label: string, d: string, cells: string[], added: string[]) => [label, d, ...cells, ...added];
  const lat = (q: 'p50' | 'p99') =>
    row(
      `chat ${q} ms`,
      ms(latDirect[q]),
      latOthers.map((l) => ms(l[q])),
      latOthers.map((l) => ms(l[q] - latDirect[q])),
    );
  const warm = (q: 'p50' | 'p99') =>
    warmDirect
      ? [
          row(
            `chat ${q} ms, warm (blocks of 50)`,
            ms(warmDirect[q]),
            warmOthers.map((l) => ms(l[q])),
            warmOthers.map((l) => ms(l[q] - warmDirect[q])),
          ),
        ]
      : [];
  const cpuCell = (n: number | undefined) => (n === undefined ? 'n/a' : n.toFixed(2));
  const cpu = (side: 'gateway' | 'node') =>
    row(
      `chat CPU ms per request, ${side}`,
      'n/a',
      measured.cpu.map((c) => cpuCell(c[side])),
      others.map(() => ''),
    );
  const cpuLoaded = (side: 'gateway' | 'main' | 'node' | 'bench' | 'store') =>
    row(
      side === 'bench'
        ? `same at ${concurrency} loops, client + upstream (this process)`
        : side === 'store'
          ? `same at ${concurrency} loops, PostgreSQL backends`
          : side === 'main'
            ? `  of which the gateway's main thread`
            : `same at ${concurrency} loops, ${side}`,
      side === 'bench' && tDirect.done > 0 ? cpuCell(tDirect.benchCpuMs / tDirect.done) : 'n/a',
      loadedCpu.map((c) => cpuCell(c[side])),
      others.map(() => ''),
    );
  // What 2 CPUs could serve at these costs if nothing else ran and nothing waited: the ceiling
  // of requests/second the machine allows each target, the bench's own share included.
  const ceiling = loadedCpu.map((c) => {
    const total = (c.gateway ?? 0) + (c.node ?? 0) + (c.bench ?? 0) + (c.store ?? 0);
    return total > 0 ? ((availableParallelism() * 1000) / total).toFixed(0) : 'n/a';
  });
  const noStream = relays.map(() => 'n/a');
  const ttft = (q: 'p50' | 'p99') =>
    row(
      `stream first token ${q} ms`,
      ms(ttftDirect[q]),
      [...noStream, ...ttftStreamers.map((l) => ms(l[q]))],
      [...noStream, ...ttftStreamers.map((l) => ms(l[q] - ttftDirect[q]))],
    );
  printTable([
    row(
      '',
      'direct',
      names,
      names.map((n) => `${n.replace('via ', '')} added / ratio`),
    ),
    lat('p50'),
    lat('p99'),
    ...warm('p50'),
    ...warm('p99'),
    ttft('p50'),
    ttft('p99'),
    cpu('gateway'),
    cpu('node'),
    cpuLoaded('gateway'),
    cpuLoaded('main'),
    cpuLoaded('node'),
    cpuLoaded('bench'),
    ...(STORE.kind === 'postgres'
      ? [
          cpuLoaded('store'),
          row(
            `same at ${concurrency} loops, gateway + PostgreSQL backends`,
            'n/a',
            loadedCpu.map((c) => cpuCell(c.gateway === undefined ? undefined : c.gateway + (c.store ?? 0))),
            others.map(() => ''),
          ),
        ]
      : []),
    row(
      `req/s the CPUs allow at those costs`,
      'n/a',
      ceiling,
      others.map(() => ''),
    ),
    row(
      `chat req/s (${concurrency} concurrent)`,
      tDirect.rps.toFixed(0),
      tOthers.map((t) => t.rps.toFixed(0)),
      tOthers.map((t) => ratio(t.rps, tDirect.rps)),
    ),
    row(
      'failed',
      String(tDirect.failed),
      tOthers.map((t) => String(t.failed)),
      others.map(() => ''),
    ),
  ]);
  // A failed request is counted, not thrown: say what the first one of each target was.
  for (const [name, t] of [['direct', tDirect] as const, ...names.map((n, i) => [n, tOthers[i]] as const)])
    if (t?.firstFailure) console.log(`${name}: ${t.failed} requests failed under load, the first: ${t.firstFailure}`);
  loadWindow = { from: loadFrom, to: loadTo };
} finally {
  // Agents before their servers, so no node is left polling a server that is gone.
  for (const p of [...running].reverse()) await stop(p);
  if (loadWindow) {
    const window = loadWindow;
    for (const [i, t] of svcTargets.entries()) {
      if (!t.store) continue;
      const { handed, total } = await handOvers(t.store, window.from, window.to);
      console.log(
        `${i === 0 ? 'via svc' : 'via baseline'}: under ${concurrency} loops, ${handed} of ${total} chat requests (${total ? ((100 * handed) / total).toFixed(1) : '0'} %) were handed to the node at once; the rest waited in the store for its next pull or slot`,
      );
    }
  }
  await upstream.close();
  for (const cleanup of cleanups) await cleanup();
  STORE.stop();
}

/**
 * Where one chat request's time goes, hop by hop: `svc serve` and `svc node` (real processes, on
 * the node channel) with `bench/hops-preload.mjs` loaded, which records when each process passed
 * each point of the request's way (@svc/protocol's `hop` marks, Node's HTTP server, the node's
 * upstream call through undici) on the machine's shared clock. One client sends non-streamed chat
 * requests back to back; each request's marks are put in order and the time between consecutive
 * ones is reported (p50 and p90 over the requests), with the round trips of the upstream alone
 * and of the bare WebSocket relay (bench/relay.ts: the same processes and hops, no work) taking
 * turns in blocks of 50, as in `gateway.ts`'s warm figures. `--baseline <checkout>` adds another
 * checkout's pair (a checkout without the `hop` marks shows only the HTTP and upstream ones).
 *
 * @example
 * npx tsx bench/hops.ts --requests 1000
 * npx tsx bench/hops.ts --baseline /tmp/svc-at-main
 * DATABASE_URL=postgres://... npx tsx bench/hops.ts
 */
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { availableParallelism, cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { startOpenAITestServer } from '@svc/node-agent/testing';
import { positiveInt, printTable, turnOrder, wholeNumber } from './lib.js';
import * as svc from './svc.js';

const { values } = parseArgs({
  options: {
    requests: { type: 'string', default: '1000' },
    warmup: { type: 'string', default: '1000' },
    baseline: { type: 'string' },
  },
});
const requests = positiveInt('requests', values.requests);
const warmup = wholeNumber('warmup', values.warmup);
const BASELINE_BIN = svc.baselineBin(values.baseline);
const PRELOAD = fileURLToPath(new URL('./hops-preload.mjs', import.meta.url));
const BODY = JSON.stringify({
  model: 'tinyllama',
  messages: [{ role: 'user', content: 'the quick brown fox jumps over the lazy dog' }],
  max_tokens: 16,
});

/** The points of a request's way, in the order it passes them: `<process> <mark>`. */
const WAY = [
  'client send',
  'gateway http.in',
  'gateway gateway.handler',
  'gateway gateway.pushed',
  'node node.work',
  'node upstream.create',
  'node upstream.headers',
  'node upstream.end',
  'node node.sent',
  'gateway work.received',
  'gateway work.receipt',
  'gateway gateway.answer',
  'client answered',
] as const;

/** What happens between two consecutive points (when both were recorded). */
const BETWEEN: Record<string, string> = {
  'client send > gateway http.in': 'wire: client to gateway (a wake-up)',
  'gateway http.in > gateway gateway.handler': 'gateway: HTTP, route, auth, rate limits, body, validation',
  'gateway gateway.handler > gateway gateway.pushed': 'gateway: route, credit, ticket, push the work',
  'gateway gateway.pushed > node node.work': 'wire: gateway to node (channel)',
  'node node.work > node upstream.create': 'node: the work message to the engine call',
  'node upstream.create > node upstream.headers': 'engine: the upstream answers (its process)',
  'node upstream.headers > node upstream.end': 'engine: the answer body',
  'node upstream.end > node node.sent': 'node: result hashed, receipt signed and journaled, sent',
  'node node.sent > gateway work.received': 'wire: node to gateway (channel)',
  'gateway work.received > gateway work.receipt': 'gateway: the message parsed and checked',
  'gateway work.receipt > gateway gateway.answer': 'gateway: receipt verified, completed in memory',
  // Node's 'http.server.response.finish' may come after the client read the answer: no mark there.
  'gateway gateway.answer > client answered': 'gateway: the answer serialized and written; wire to client',
};

const now = () => performance.timeOrigin + performance.now();

interface Target {
  name: string;
  url: string;
  headers: Record<string, string>;
  /** Where its processes' marks are written (svc targets). */
  marksDir?: string;
  /** The client's send and answer times of each timed request. */
  sent: [number, number][];
}

async function chat(t: Target): Promise<[number, number]> {
  const sent = now();
  const res = await fetch(`${t.url}/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...t.headers },
    body: BODY,
  });
  const body = (await res.json()) as { choices?: unknown[] };
  if (res.status !== 200 || !body.choices) throw new Error(`${t.name}: chat answered ${res.status}`);
  return [sent, now()];
}

/** Marks a `--baseline` checkout may still write under their names before 2026-11-28. */
const RENAMED: Record<string, string> = { 'gateway.received': 'work.received', 'gateway.receipt': 'work.receipt' };

/** Every process's marks of a target, as `<process> <mark>` at epoch ms, in time order. */
async function marksOf(t: Target): Promise<[string, number][]> {
  const out: [string, number][] = [];
  if (!t.marksDir) return out;
  for (const file of await readdir(t.marksDir)) {
    const role = file.split('-')[0] ?? '?';
    const flat = JSON.parse(await readFile(join(t.marksDir, file), 'utf8')) as (string | number)[];
    for (let i = 0; i + 1 < flat.length; i += 2) {
      const mark = String(flat[i]);
      out.push([`${role} ${RENAMED[mark] ?? mark}`, Number(flat[i + 1])]);
    }
  }
  return out.sort((a, b) => a[1] - b[1]);
}

/**
 * Each timed request's way: the first mark of each point of `WAY` after the one before, within
 * the request's send and answer; the time between consecutive points found, per pair, over every
 * request. A point never recorded (an older checkout) merges its two neighbours' spans.
 */
function spans(t: Target, marks: [string, number][]): Map<string, number[]> {
  const out = new Map<string, number[]>();
  let from = 0;
  for (const [sent, answered] of t.sent) {
    while (from < marks.length && (marks[from]?.[1] ?? 0) < sent) from++;
    const inside: [string, number][] = [];
    for (let i = from; i < marks.length && (marks[i]?.[1] ?? Infinity) <= answered; i++) {
      const m = marks[i];
      if (m) inside.push(m);
    }
    let previous: [string, number] = ['client send', sent];
    let at = 0;
    for (const point of WAY.slice(1)) {
      let found: [string, number] | undefined;
      if (point === 'client answered') found = [point, answered];
      else {
        const k = inside.findIndex((m, i) => i >= at && m[0] === point && m[1] >= previous[1]);
        if (k >= 0) {
          found = inside[k];
          at = k + 1;
        }
      }
      if (!found) continue;
      const key = `${previous[0]} > ${found[0]}`;
      const list = out.get(key) ?? [];
      list.push((found[1] - previous[1]) * 1000);
      out.set(key, list);
      previous = found;
    }
  }
  return out;
}

function quantile(samples: number[], q: number): number {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
}

const upstream = await startOpenAITestServer();
const running: svc.SvcProcess[] = [];
const cleanups: (() => Promise<void>)[] = [];
try {
  const relayOf = (args: string[]) => svc.svcProcess(args, {}, ['--import', 'tsx', svc.RELAY]);
  const relayGateway = relayOf(['gateway-ws']);
  running.push(relayGateway);
  const relayUrl = await svc.listeningUrl('the bare relay', relayGateway);
  running.push(relayOf(['node-ws', relayUrl, upstream.url, '16']));
  const direct: Target = { name: 'direct', url: upstream.url, headers: {}, sent: [] };
  const relay: Target = { name: 'bare relay ws', url: `${relayUrl}/v1`, headers: {}, sent: [] };
  await svc.until(
    'the relay node connecting',
    () =>
      chat(relay).then(
        () => true,
        () => undefined,
      ),
    () => '',
  );
  const svcTarget = async (name: string, bin: string): Promise<Target> => {
    const marksDir = await mkdtemp(join(tmpdir(), 'svc-bench-hops-'));
    cleanups.push(() => rm(marksDir, { recursive: true, force: true }));
    process.env.SVC_HOPS_DIR = marksDir;
    const t: Target = { name, url: '', headers: {}, marksDir, sent: [] };
    const pair = await svc.startSvc(
      bin,
      upstream.url,
      running,
      cleanups,
      (p) =>
        chat({ ...t, url: `${p.url}/v1`, headers: { authorization: `Bearer ${p.buyerKey}` } }).then(() => undefined),
      { nodeFlags: ['--import', PRELOAD] },
    );
    delete process.env.SVC_HOPS_DIR;
    return { ...t, url: `${pair.url}/v1`, headers: { authorization: `Bearer ${pair.buyerKey}` } };
  };
  const svcs = [await svcTarget('svc', svc.SVC_BIN)];
  if (BASELINE_BIN) svcs.push(await svcTarget('baseline', BASELINE_BIN));
  const targets = [direct, relay, ...svcs];
  for (let i = 0; i < warmup; i++) for (const t of [relay, ...svcs]) await chat(t);
  // Blocks of 50 back-to-back requests per target, each after one untimed request, taking turns
  // forward and backward (turnOrder).
  for (let done = 0; done < requests; done += 50)
    for (const k of turnOrder(done / 50, targets.length)) {
      const t = targets[k] as (typeof targets)[number];
      await chat(t);
      for (let i = 0; i < Math.min(50, requests - done); i++) t.sent.push(await chat(t));
    }
  // The marks are written as the processes exit: agents before their servers.
  for (const p of [...running].reverse()) await svc.stop(p);
  running.length = 0;

  const storeKind = process.env.DATABASE_URL ? 'postgres' : 'pglite';
  console.log(
    `node ${process.version}, ${availableParallelism()} CPUs (${cpus()[0]?.model ?? 'unknown'}), store ${storeKind}; ${requests} chat requests per target, one at a time in blocks of 50, after ${warmup} untimed\n`,
  );
  const p50 = (t: Target) =>
    quantile(
      t.sent.map(([a, b]) => (b - a) * 1000),
      0.5,
    );
  printTable([
    ['', ...targets.map((t) => t.name)],
    ['round trip p50 us', ...targets.map((t) => p50(t).toFixed(0))],
  ]);
  for (const t of svcs) {
    const byPair = spans(t, await marksOf(t));
    const rows = [...byPair].map(([key, list]) => [
      BETWEEN[key] ?? key.replace(' > ', ' -> '),
      quantile(list, 0.5).toFixed(0),
      quantile(list, 0.9).toFixed(0),
      String(list.length),
    ]);
    const sum = [...byPair.values()].reduce((s, list) => s + quantile(list, 0.5), 0);
    console.log(`\n${t.name}: each span's p50 and p90 in microseconds; the p50s sum to ${sum.toFixed(0)} us`);
    printTable([['span', 'p50', 'p90', 'requests'], ...rows]);
  }
} finally {
  for (const p of [...running].reverse()) await svc.stop(p);
  await upstream.close();
  for (const cleanup of cleanups) await cleanup();
}

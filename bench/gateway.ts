/**
 * What the gateway adds on top of the engine it fronts: the same OpenAI requests sent straight to
 * a fast local OpenAI-compatible upstream (the test server, no artificial delay) and through
 * `svc serve` + `svc node` (real processes; the node's engine is that upstream), in one run.
 * Reports added latency (p50/p99) for non-streamed chat, time to first token for streamed chat,
 * and requests/second under concurrency with the through/direct ratio. See bench/README.md.
 *
 * @example
 * npx tsx bench/gateway.ts --requests 300 --duration 10 --concurrency 16
 * DATABASE_URL=postgres://... npx tsx bench/gateway.ts
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { availableParallelism, cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { startOpenAITestServer } from '@svc/node-agent/testing';
import { createTestStore } from '@svc/server/testing';
import { positiveInt, printTable, ratio, wholeNumber } from './lib.js';

const { values } = parseArgs({
  options: { requests: { type: 'string', default: '300' }, duration: { type: 'string', default: '10' }, concurrency: { type: 'string', default: '16' }, warmup: { type: 'string', default: '1000' } },
});
const requests = positiveInt('requests', values.requests);
const duration = positiveInt('duration', values.duration);
const concurrency = Math.min(16, positiveInt('concurrency', values.concurrency));
const warmup = wholeNumber('warmup', values.warmup);

const MESSAGES = [{ role: 'user', content: 'the quick brown fox jumps over the lazy dog' }];
const CHAT = { model: 'tinyllama', messages: MESSAGES, max_tokens: 16 };

interface Target {
  base: string;
  headers: Record<string, string>;
}

async function chat(t: Target): Promise<void> {
  const res = await fetch(`${t.base}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...t.headers }, body: JSON.stringify(CHAT) });
  const body = (await res.json()) as { choices?: unknown[] };
  if (res.status !== 200 || !body.choices) throw new Error(`chat answered ${res.status}`);
}

/** Time to the first chunk that carries content, in ms; the stream is read to its end. */
async function firstToken(t: Target): Promise<number> {
  const started = performance.now();
  const res = await fetch(`${t.base}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...t.headers }, body: JSON.stringify({ ...CHAT, stream: true }) });
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

async function sequential(n: number, once: () => Promise<number>): Promise<{ p50: number; p99: number }> {
  for (let i = 0; i < Math.min(50, n); i++) await once();
  const samples: number[] = [];
  for (let i = 0; i < n; i++) samples.push(await once());
  return quantiles(samples);
}

const timed = (fn: () => Promise<void>) => async () => {
  const started = performance.now();
  await fn();
  return performance.now() - started;
};

/** `workers` loops of back-to-back requests for `seconds`, after a 2 s warm-up; mean requests/second. */
async function throughput(workers: number, seconds: number, once: () => Promise<void>): Promise<{ rps: number; failed: number }> {
  const run = async (ms: number) => {
    const deadline = Date.now() + ms;
    let done = 0;
    let failed = 0;
    await Promise.all(
      Array.from({ length: workers }, async () => {
        while (Date.now() < deadline) {
          try {
            await once();
            done++;
          } catch {
            failed++;
          }
        }
      }),
    );
    return { rps: done / (ms / 1000), failed };
  };
  await run(2_000);
  return run(seconds * 1000);
}

const SVC_BIN = fileURLToPath(new URL('../packages/cli/bin/svc.js', import.meta.url));
const RELAY = fileURLToPath(new URL('./relay.ts', import.meta.url));

/** Extra node flags for the svc processes, e.g. `BENCH_NODE_ARGS='--cpu-prof --cpu-prof-dir=/tmp/prof'`. */
const NODE_ARGS = process.env.BENCH_NODE_ARGS?.split(/\s+/).filter(Boolean) ?? [];

/** Runs `svc <args>` (or, given `script`, that script) as a child process; `output()` is what it printed so far. */
function svcProcess(args: string[], env: Record<string, string>, script: string[] = [SVC_BIN]): { child: ChildProcess; output: () => string } {
  const child = spawn(process.execPath, [...NODE_ARGS, ...script, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  return { child, output: () => out };
}

async function until<T>(what: string, fn: () => Promise<T | undefined> | T | undefined, output: () => string, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const value = await fn();
    if (value !== undefined) return value;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${what} did not happen in time:\n${output()}`);
}

async function stop(p: { child: ChildProcess } | undefined): Promise<void> {
  if (!p || p.child.exitCode !== null) return;
  const exited = new Promise((resolve) => p.child.once('exit', resolve));
  p.child.kill('SIGTERM');
  await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
  if (p.child.exitCode === null) p.child.kill('SIGKILL');
}

const upstream = await startOpenAITestServer();
const store = await createTestStore();
const nodeDir = await mkdtemp(join(tmpdir(), 'svc-bench-node-'));
const unlimited = { SVC_RATE_LIMIT_BURST: '1000000', SVC_RATE_LIMIT_RPS: '1000000', SVC_ORG_RATE_LIMIT_BURST: '1000000', SVC_ORG_RATE_LIMIT_RPS: '1000000', SVC_ANON_RATE_LIMIT_BURST: '1000000', SVC_ANON_RATE_LIMIT_RPS: '1000000' };
let serve: ReturnType<typeof svcProcess> | undefined;
let node: ReturnType<typeof svcProcess> | undefined;
let relayGateway: ReturnType<typeof svcProcess> | undefined;
let relayNode: ReturnType<typeof svcProcess> | undefined;
try {
  // The bare relay (bench/relay.ts): the same three processes and hops, nothing else.
  const relayOf = (args: string[]) => svcProcess(args, {}, ['--import', 'tsx', RELAY]);
  const bareGateway = (relayGateway = relayOf(['gateway']));
  const relayUrl = await until('the bare relay', () => /listening on (http:\/\/\S+)/.exec(bareGateway.output())?.[1], bareGateway.output);
  relayNode = relayOf(['node', relayUrl, upstream.url, '16']);

  serve = svcProcess(['serve', '--port', '0', '--host', '127.0.0.1', '--data-dir', store.dataDir], {
    SVC_LOG_LEVEL: 'silent',
    SVC_FREE_TIER_CENTS: '100000000',
    ...unlimited,
    DATABASE_URL: store.databaseUrl ?? '',
  });
  const server = serve;
  const url = await until('svc serve', () => /listening on (http:\/\/\S+)/.exec(server.output())?.[1], server.output);
  const signup = async (email: string) => {
    const res = await fetch(`${url}/api/v1/auth/signup`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ email, password: 'benchmark password' }) });
    return (await res.json()) as { api_key: string };
  };
  const buyer = await signup('buyer@bench.test');
  const operator = await signup('operator@bench.test');
  const keyRes = await fetch(`${url}/api/v1/auth/api-keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${operator.api_key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ label: 'node', scopes: ['operator'] }),
  });
  const { api_key: operatorKey } = (await keyRes.json()) as { api_key: string };
  node = svcProcess(['node', '--server', url, '--data-dir', nodeDir, '--country', 'CA', '--upstream', upstream.url, '--model', 'tinyllama', '--concurrency', '16'], { SVC_NODE_API_KEY: operatorKey });
  const agent = node;
  const direct: Target = { base: upstream.url, headers: {} };
  const through: Target = { base: `${url}/v1`, headers: { authorization: `Bearer ${buyer.api_key}` } };
  const relay: Target = { base: `${relayUrl}/v1`, headers: {} };
  await until('the node registering', () => chat(through).then(() => true, () => undefined), agent.output);
  // A gateway runs for days: warm the processes up (V8 tiers PGlite's WASM and the JS up over the
  // first few hundred requests) so the figures are the steady state, not the first minute.
  for (let i = 0; i < warmup; i++) await chat(through);
  for (let i = 0; i < warmup; i++) await chat(relay);

  const storeKind = store.databaseUrl ? 'postgres' : 'pglite';
  console.log(`node ${process.version}, ${availableParallelism()} CPUs (${cpus()[0]?.model ?? 'unknown'}), store ${storeKind}; svc serve and svc node as separate processes`);
  console.log(`warm-up: ${warmup} requests through svc; latency: ${requests} sequential requests each; throughput: ${concurrency} concurrent requests, ${duration}s each after 2s warm-up`);
  console.log('upstream: the OpenAI test server in this process (echo model, no added delay; streams one word per chunk, 1 ms apart)\n');
  const latDirect = await sequential(requests, timed(() => chat(direct)));
  const latRelay = await sequential(requests, timed(() => chat(relay)));
  const latThrough = await sequential(requests, timed(() => chat(through)));
  const ttftDirect = await sequential(requests, () => firstToken(direct));
  const ttftThrough = await sequential(requests, () => firstToken(through));
  const tDirect = await throughput(concurrency, duration, () => chat(direct));
  const tRelay = await throughput(concurrency, duration, () => chat(relay));
  const tThrough = await throughput(concurrency, duration, () => chat(through));
  const ms = (n: number) => n.toFixed(2);
  printTable([
    ['', 'direct', 'bare relay', 'via svc', 'relay added / ratio', 'svc added / ratio'],
    ['chat p50 ms', ms(latDirect.p50), ms(latRelay.p50), ms(latThrough.p50), ms(latRelay.p50 - latDirect.p50), ms(latThrough.p50 - latDirect.p50)],
    ['chat p99 ms', ms(latDirect.p99), ms(latRelay.p99), ms(latThrough.p99), ms(latRelay.p99 - latDirect.p99), ms(latThrough.p99 - latDirect.p99)],
    ['stream first token p50 ms', ms(ttftDirect.p50), 'n/a', ms(ttftThrough.p50), 'n/a', ms(ttftThrough.p50 - ttftDirect.p50)],
    ['stream first token p99 ms', ms(ttftDirect.p99), 'n/a', ms(ttftThrough.p99), 'n/a', ms(ttftThrough.p99 - ttftDirect.p99)],
    [`chat req/s (${concurrency} concurrent)`, tDirect.rps.toFixed(0), tRelay.rps.toFixed(0), tThrough.rps.toFixed(0), ratio(tRelay.rps, tDirect.rps), ratio(tThrough.rps, tDirect.rps)],
    ['failed', String(tDirect.failed), String(tRelay.failed), String(tThrough.failed), '', ''],
  ]);
} finally {
  await stop(node);
  await stop(serve);
  await stop(relayNode);
  await stop(relayGateway);
  await upstream.close();
  await store.drop();
  await rm(nodeDir, { recursive: true, force: true });
}

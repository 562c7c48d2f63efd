/**
 * The processes of the gateway benches (`gateway.ts`, `hops.ts`): `svc serve` and `svc node` of a
 * checkout started as a buyer would reach them, the bare relays' processes, and stopping them.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { createTestStore, type TestStore } from '@svc/server/testing';
import { atExit } from './lib.js';

/**
 * The `svc` binary of another checkout given as `--baseline` (its packages installed), or
 * undefined without the flag; throws a clear error when the checkout has none.
 */
export function baselineBin(checkout: string | undefined): string | undefined {
  if (checkout === undefined) return undefined;
  const bin = join(resolve(checkout), 'packages/cli/bin/svc.js');
  if (!existsSync(bin))
    throw new Error(`--baseline must be a checkout of this project with its packages installed; ${bin} is missing`);
  return bin;
}

/**
 * The node flags a checkout's `svc` runs with: those on its binary's first line
 * (`#!/usr/bin/env -S node --max-semi-space-size=32`), none for a plain `#!/usr/bin/env node`.
 * The bench starts each checkout's processes as its own `svc` starts, so a flag a change adds
 * there is measured against a baseline that runs without it.
 *
 * @example
 * launchFlags(SVC_BIN); // ['--max-semi-space-size=32']
 */
export function launchFlags(bin: string): string[] {
  const [first = ''] = readFileSync(bin, 'utf8').split('\n', 1);
  const match = /^#!\/usr\/bin\/env\s+(?:-S\s+)?node(?:\s+(.*))?$/.exec(first.trim());
  if (!match) throw new Error(`${bin} does not start with a node shebang: ${first}`);
  return (match[1] ?? '').split(/\s+/).filter(Boolean);
}

/**
 * `KEY=VALUE` settings from a command-line flag (`--env`, `--baseline-env`), comma-separated, as
 * an environment; throws a clear error for anything else.
 *
 * @example
 * envSettings('--env', 'SVC_WRITER_FLUSH_MS=50'); // { SVC_WRITER_FLUSH_MS: '50' }
 */
export function envSettings(flag: string, raw: string | undefined): Record<string, string> {
  const env: Record<string, string> = {};
  for (const part of (raw ?? '').split(',').filter(Boolean)) {
    const match = /^([A-Z][A-Z0-9_]*)=(.*)$/.exec(part);
    if (!match?.[1] || match[2] === undefined) throw new Error(`${flag} takes KEY=VALUE[,KEY=VALUE...], got '${part}'`);
    env[match[1]] = match[2];
  }
  return env;
}

/** A child process and what it printed so far. */
export interface SvcProcess {
  child: ChildProcess;
  output: () => string;
}

export const SVC_BIN = fileURLToPath(new URL('../packages/cli/bin/svc.js', import.meta.url));
export const RELAY = fileURLToPath(new URL('./relay.ts', import.meta.url));

/** Extra node flags for the svc processes, e.g. `BENCH_NODE_ARGS='--cpu-prof --cpu-prof-dir=/tmp/prof'`. */
const NODE_ARGS = process.env.BENCH_NODE_ARGS?.split(/\s+/).filter(Boolean) ?? [];

/** The processes started here and still running: killed when the bench exits however it exits. */
const children = new Set<ChildProcess>();
let reaping = false;

/**
 * Kills every process started here as the bench exits, also when it does not reach its own
 * `stop` calls ({@link atExit}: a `timeout` or Ctrl-C, a closed pipe or an error). A `svc serve`
 * left running takes a CPU from whatever runs next (on 2026-11-27 three such made a CI run fail).
 */
function reapOnExit(child: ChildProcess): void {
  if (!reaping) {
    reaping = true;
    atExit(() => {
      for (const c of children) c.kill('SIGKILL');
    });
  }
  children.add(child);
  child.once('exit', () => children.delete(child));
}

/** Runs `svc <args>` (or, given `script`, that script: another checkout's svc, the relay) as a child process; `output()` is what it printed so far. */
export function svcProcess(args: string[], env: Record<string, string>, script: string[] = [SVC_BIN]): SvcProcess {
  const child = spawn(process.execPath, [...NODE_ARGS, ...script, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  reapOnExit(child);
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  return { child, output: () => out };
}

export async function until<T>(
  what: string,
  fn: () => Promise<T | undefined> | T | undefined,
  output: () => string,
  timeoutMs = 60_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const value = await fn();
    if (value !== undefined) return value;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${what} did not happen in time:\n${output()}`);
}

/** The URL a started process prints in its `listening on <url>` line. */
export function listeningUrl(what: string, p: SvcProcess): Promise<string> {
  return until(what, () => /listening on (http:\/\/\S+)/.exec(p.output())?.[1], p.output);
}

export async function stop(p: { child: ChildProcess } | undefined): Promise<void> {
  if (!p || p.child.exitCode !== null) return;
  const exited = new Promise((resolve) => p.child.once('exit', resolve));
  p.child.kill('SIGTERM');
  await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
  if (p.child.exitCode === null) p.child.kill('SIGKILL');
}

/** No rate limits: the benches measure the gateway, not its 429s. */
export const UNLIMITED_RATES = {
  SVC_RATE_LIMIT_BURST: '1000000',
  SVC_RATE_LIMIT_RPS: '1000000',
  SVC_ORG_RATE_LIMIT_BURST: '1000000',
  SVC_ORG_RATE_LIMIT_RPS: '1000000',
  SVC_ANON_RATE_LIMIT_BURST: '1000000',
  SVC_ANON_RATE_LIMIT_RPS: '1000000',
};

/**
 * A non-streamed or streamed chat request of the benches (tinyllama, one short message, 16 tokens)
 * to a pair's `/v1/chat/completions`, with its buyer's key.
 *
 * @example
 * const res = await postChat(pair, { stream: true });
 */
export function postChat(
  pair: Pick<SvcPair, 'url' | 'buyerKey'>,
  options: { stream?: boolean; signal?: AbortSignal } = {},
): Promise<Response> {
  return fetch(`${pair.url}/v1/chat/completions`, {
    method: 'POST',
    signal: options.signal,
    headers: { 'content-type': 'application/json', authorization: `Bearer ${pair.buyerKey}` },
    body: JSON.stringify({
      model: 'tinyllama',
      messages: [{ role: 'user', content: 'the quick brown fox jumps over the lazy dog' }],
      max_tokens: 16,
      stream: options.stream ?? false,
    }),
  });
}

/** A started `svc serve` with its `svc node`: the buyer's key, the processes, the store. */
export interface SvcPair {
  /** `http://127.0.0.1:<port>`. */
  url: string;
  buyerKey: string;
  server: SvcProcess;
  agent: SvcProcess;
  store: TestStore;
}

/**
 * `svc serve` on a fresh store and one `svc node` over the upstream, from the checkout of `bin`
 * (its `packages/cli/bin/svc.js`), for a buyer with ample credits and no rate limits. Each process
 * goes to `running` (stop them in reverse), the store and the node's directory to `cleanups`;
 * resolves once `ready` (a request through the pair) succeeds. Both processes run with the
 * checkout's own launch flags ({@link launchFlags}); `options.nodeFlags` are node's flags for both
 * processes besides (`--import` of a module, say), after BENCH_NODE_ARGS and those; `options.env` is
 * added to `svc serve`'s environment (a setting to compare, say).
 */
export async function startSvc(
  bin: string,
  upstreamUrl: string,
  running: SvcProcess[],
  cleanups: (() => Promise<void>)[],
  ready: (pair: SvcPair) => Promise<void>,
  options: { nodeFlags?: string[]; env?: Record<string, string> } = {},
): Promise<SvcPair> {
  const nodeFlags = [...launchFlags(bin), ...(options.nodeFlags ?? [])];
  const store = await createTestStore();
  const nodeDir = await mkdtemp(join(tmpdir(), 'svc-bench-node-'));
  cleanups.push(async () => {
    await store.drop();
    await rm(nodeDir, { recursive: true, force: true });
  });
  const server = svcProcess(
    ['serve', '--port', '0', '--host', '127.0.0.1', '--data-dir', store.dataDir],
    {
      SVC_LOG_LEVEL: 'silent',
      SVC_FREE_TIER_CENTS: '100000000',
      ...UNLIMITED_RATES,
      DATABASE_URL: store.databaseUrl ?? '',
      ...options.env,
    },
    [...nodeFlags, bin],
  );
  running.push(server);
  const url = await listeningUrl('svc serve', server);
  const signup = async (email: string) => {
    const res = await fetch(`${url}/api/v1/auth/signup`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email, password: 'benchmark password' }),
    });
    return (await res.json()) as { api_key: string; token: string };
  };
  const buyer = await signup('buyer@bench.test');
  const operator = await signup('operator@bench.test');
  const keyRes = await fetch(`${url}/api/v1/auth/api-keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${operator.token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ label: 'node', scopes: ['operator'] }),
  });
  const { api_key: operatorKey } = (await keyRes.json()) as { api_key: string };
  const agent = svcProcess(
    [
      'node',
      '--server',
      url,
      '--data-dir',
      nodeDir,
      '--country',
      'CA',
      '--upstream',
      upstreamUrl,
      '--model',
      'tinyllama',
      '--concurrency',
      '16',
    ],
    { SVC_NODE_API_KEY: operatorKey },
    [...nodeFlags, bin],
  );
  running.push(agent);
  const pair: SvcPair = { url, buyerKey: buyer.api_key, server, agent, store };
  await until(
    'the node registering',
    () =>
      ready(pair).then(
        () => true,
        () => undefined,
      ),
    agent.output,
  );
  return pair;
}

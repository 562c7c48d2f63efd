import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const SVC_BIN = fileURLToPath(new URL('../bin/svc.js', import.meta.url));
/** Set by the global setup (`global-setup.ts`) to the compiled `svc` the spawned processes run. */
export const CLI_BUNDLE_ENV = 'SVC_TEST_CLI_BUNDLE';
/**
 * V8 flags of the compiled `svc` processes. `--liftoff-only`: PGlite's WebAssembly stays in V8's
 * baseline tier, never recompiled by the optimizing one, which a process living seconds pays for
 * and rarely gets back: `svc serve` on PGlite listens after 2.8 to 3.3 s of CPU instead of 4.2 to
 * 4.4 s, and the process-level test files cost 20 % less CPU (crash-holds, serve-kill,
 * ingest-crash, capture, evidence, marketplace, log e2e, 2026-11-28). Not for the test workers,
 * whose PGlite lives a whole run: there the 5 MB ingestion test took 46 s of CPU against 33 s.
 * The same code runs; only how V8 compiles it differs.
 */
const COMPILED_FLAGS = ['--liftoff-only'];

export interface SpawnedSvc {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  /** Resolves with the exit code (or the signal name). */
  exited: Promise<number | string>;
}

/**
 * Runs `svc <args>` as a real process with the given environment added to this one's. Under
 * `npm test` the process runs `svc` as the global setup compiled it for this run (the same
 * sources, without tsx's loader: about 1 s of CPU less per process, see cli-bundle.ts; and with
 * COMPILED_FLAGS); with `{ bin: 'tsx' }`, or outside vitest's setup, it runs bin/svc.js as a user
 * does.
 *
 * @example
 * const p = spawnSvc(['serve', '--port', '0'], { SVC_DATA_DIR: dir });
 */
export function spawnSvc(
  args: string[],
  env: Record<string, string> = {},
  options: { bin?: 'compiled' | 'tsx' } = {},
): SpawnedSvc {
  const compiled = process.env[CLI_BUNDLE_ENV];
  const bin = options.bin !== 'tsx' && compiled ? compiled : SVC_BIN;
  const child = spawn(process.execPath, [...(bin === compiled ? COMPILED_FLAGS : []), bin, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number | string>((resolve) =>
    child.on('exit', (code, signal) => resolve(code ?? signal ?? -1)),
  );
  return { child, stdout: () => out, stderr: () => err, exited };
}

/** Waits until `svc serve` prints its URL, or fails with what it printed. */
export async function waitForUrl(p: SpawnedSvc, timeoutMs = 60_000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const match = /listening on (http:\/\/\S+)/.exec(p.stdout());
    if (match?.[1]) return match[1];
    if (p.child.exitCode !== null) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`svc serve did not start:\n${p.stdout()}\n${p.stderr()}`);
}

/** Polls `probe` every 100 ms until it yields a value (errors count as not yet), or fails naming `what`. */
export async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** `svc node` in Canada with 16 slots, serving tinyllama from `upstreamUrl`, on `dataDir` (`env` added to its environment). */
export function spawnNode(
  base: string,
  dataDir: string,
  upstreamUrl: string,
  nodeKey: string,
  env: Record<string, string> = {},
): SpawnedSvc {
  return spawnSvc(
    [
      'node',
      '--server',
      base,
      '--data-dir',
      dataDir,
      '--country',
      'CA',
      '--upstream',
      upstreamUrl,
      '--model',
      'tinyllama',
      '--concurrency',
      '16',
    ],
    { SVC_NODE_API_KEY: nodeKey, ...env },
  );
}

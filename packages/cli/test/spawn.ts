import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const SVC_BIN = fileURLToPath(new URL('../bin/svc.js', import.meta.url));

export interface SpawnedSvc {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  /** Resolves with the exit code (or the signal name). */
  exited: Promise<number | string>;
}

/**
 * Runs `svc <args>` as a real process with the given environment added to this one's.
 *
 * @example
 * const p = spawnSvc(['serve', '--port', '0'], { SVC_DATA_DIR: dir });
 */
export function spawnSvc(args: string[], env: Record<string, string> = {}): SpawnedSvc {
  const child = spawn(process.execPath, [SVC_BIN, ...args], {
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

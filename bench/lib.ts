/** Helpers shared by the benchmark scripts (run by hand; see bench/README.md). */
import { request } from 'node:http';
import { constants } from 'node:os';
import autocannon from 'autocannon';

export const WARMUP_SECONDS = 2;

let signalsExit = false;

/**
 * Runs `fn` as the process exits, however it exits: its end, an error, a closed pipe, or a
 * `timeout` or Ctrl-C (SIGINT, SIGTERM and SIGHUP become an exit with status 128 + the signal's
 * number). `fn` must be synchronous: nothing asynchronous runs once the process exits.
 *
 * @example
 * atExit(() => child.kill('SIGKILL'));
 */
export function atExit(fn: () => void): void {
  process.once('exit', fn);
  if (signalsExit) return;
  signalsExit = true;
  // The listeners stay: with none left, a second signal while the exit handlers run (Ctrl-C
  // reaches this process from the terminal and again through tsx) would kill it half-way.
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const)
    process.on(signal, () => process.exit(128 + constants.signals[signal]));
}

export interface Throughput {
  rps: number;
  p50: number;
  p99: number;
  failed: number;
}

export function positiveInt(name: string, raw: string): number {
  if (!/^[1-9]\d*$/.test(raw)) throw new Error(`--${name} must be a positive integer, got '${raw}'`);
  return Number(raw);
}

/** A whole number, 0 or more, from a command-line flag; throws a clear error otherwise. */
export function wholeNumber(name: string, raw: string): number {
  if (!/^(0|[1-9]\d{0,8})$/.test(raw)) throw new Error(`--${name} must be a whole number, 0 or more, got '${raw}'`);
  return Number(raw);
}

/**
 * `count` calls of `call` from `loops` concurrent loops, each loop starting its next call when its
 * last one ended.
 *
 * @example
 * await inLoops(16, 4000, () => chat(target));
 */
export async function inLoops(loops: number, count: number, call: () => Promise<void>): Promise<void> {
  let left = count;
  await Promise.all(
    Array.from({ length: loops }, async () => {
      while (left-- > 0) await call();
    }),
  );
}

/** autocannon against one URL after a warm-up; the client runs in a worker thread. */
export async function measureThroughput(
  url: string,
  options: { connections: number; duration: number; headers?: Record<string, string> },
): Promise<Throughput> {
  const base = { url, connections: options.connections, workers: 1, headers: options.headers ?? {} };
  await autocannon({ ...base, duration: WARMUP_SECONDS });
  const r = await autocannon({ ...base, duration: options.duration });
  return { rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, failed: r.errors + r.timeouts + r.non2xx };
}

/** One request at a time over a kept-alive connection; per-request latency in microseconds. */
export async function sequentialLatency(
  url: string,
  count: number,
  headers: Record<string, string> = {},
): Promise<{ p50: number; p99: number }> {
  const { Agent } = await import('node:http');
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const samples: number[] = [];
  const once = () =>
    new Promise<void>((resolve, reject) => {
      const started = performance.now();
      const req = request(url, { agent, headers }, (res) => {
        res.resume();
        res.on('end', () => {
          if (res.statusCode !== 200) reject(new Error(`${url} answered ${res.statusCode}`));
          samples.push((performance.now() - started) * 1000);
          resolve();
        });
      });
      req.on('error', reject);
      req.end();
    });
  for (let i = 0; i < Math.min(200, count); i++) await once();
  samples.length = 0;
  for (let i = 0; i < count; i++) await once();
  agent.destroy();
  samples.sort((a, b) => a - b);
  const at = (q: number) => samples[Math.min(samples.length - 1, Math.floor(q * samples.length))] ?? 0;
  return { p50: at(0.5), p99: at(0.99) };
}

export const ratio = (a: number, b: number) => (b > 0 ? `${(a / b).toFixed(2)}x` : 'n/a');

/** Prints rows as aligned columns: the first left-aligned, the numbers right-aligned. */
export function printTable(rows: string[][]): void {
  const width = (i: number) => Math.max(...rows.map((row) => row[i]?.length ?? 0));
  for (const row of rows)
    console.log(row.map((cell, i) => (i === 0 ? cell.padEnd(width(i)) : cell.padStart(width(i)))).join('  '));
}

/**
 * The order in which `count` targets take their turns in round `round`: forward, then backward
 * (0 1 2, 2 1 0, 0 1 2, ...). What a target leaves running after its turn (the records a flush
 * writes behind its answers) slows whichever target comes next; in a fixed order the same target
 * always paid for the one before it. Two identical checkouts measured 402 against 347 requests a
 * second that way (bench/README.md, Gateway, 2026-11-27).
 */
export function turnOrder(round: number, count: number): number[] {
  const order = Array.from({ length: count }, (_, i) => i);
  return round % 2 === 0 ? order : order.reverse();
}

import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { Worker } from 'node:worker_threads';

/** Plain JavaScript, so that the thread loads it under tsx, vitest and the compiled `svc` alike. */
const ENTRY = new URL('./pglite-worker.mjs', import.meta.url);

/** How long a thread whose store was closed waits for the next store before it ends. */
const IDLE_MS = 15_000;

/** The part of the WebAssembly global called here (TypeScript types it only in the DOM libraries). */
declare const WebAssembly: { compile(bytes: Uint8Array): Promise<WebAssembly.Module> };

/** Deliberate cache: PGlite's WebAssembly, compiled once per process and shared by every thread. */
let compiled: Promise<WebAssembly.Module> | undefined;
/** Deliberate cache: a thread whose store was closed, kept for the next store this process opens. */
let idle: { thread: Worker; timer: NodeJS.Timeout } | undefined;

function pgliteWasmModule(): Promise<WebAssembly.Module> {
  compiled ??= (async () => {
    const dist = dirname(createRequire(import.meta.url).resolve('@electric-sql/pglite'));
    return WebAssembly.compile(await readFile(join(dist, 'pglite.wasm')));
  })().catch((err: unknown) => {
    compiled = undefined;
    throw err;
  });
  return compiled;
}

/**
 * A thread for a store (pglite-worker.mjs): the idle one, else a new one. A thread costs little
 * to start next to PGlite's own start (the compiled WebAssembly is shared), but PGlite's start-up
 * costs about 0.3 to 0.5 s more CPU in a thread whose JavaScript is not compiled yet: the test
 * suite opens hundreds of stores one after another, so a thread that served a store serves the
 * next one. The thread never keeps the process alive by itself; its store's port does, while a
 * request waits for its answer.
 */
export async function takeStoreThread(): Promise<Worker> {
  const kept = idle;
  if (kept) {
    idle = undefined;
    clearTimeout(kept.timer);
    return kept.thread;
  }
  const thread = new Worker(ENTRY, { workerData: { pgliteWasmModule: await pgliteWasmModule() } });
  thread.unref();
  thread.once('exit', () => {
    if (idle?.thread === thread) {
      clearTimeout(idle.timer);
      idle = undefined;
    }
  });
  return thread;
}

/** Takes back a thread whose store was closed cleanly: kept for {@link IDLE_MS}, one at most. */
export function releaseStoreThread(thread: Worker): void {
  if (idle) {
    void thread.terminate();
    return;
  }
  const timer = setTimeout(() => {
    // Only while still idle: a test's fake clearTimeout may have let this timer live on.
    if (idle?.thread !== thread) return;
    idle = undefined;
    void thread.terminate();
  }, IDLE_MS);
  timer.unref();
  idle = { thread, timer };
}

import type { ServiceContext } from '../src/context.js';

/** Polls `predicate` every 20 ms until it holds (or fails after `timeoutMs`). */
export async function eventually<T>(
  predicate: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = 10_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await predicate();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * Counts the nodes' long polls waiting in this instance (inside `jobSignal.wait`), so a test can
 * wait until a node is parked instead of sleeping. Install it before the nodes start polling.
 *
 * @example
 * const polls = watchPolls(t.ctx);
 * const polled = node.poll({ waitMs: 10_000 });
 * await polls.until(1);
 */
export function watchPolls(ctx: ServiceContext): { waiting(): number; until(n: number): Promise<number> } {
  const signal = ctx.jobSignal;
  const wait = signal.wait.bind(signal);
  let waiting = 0;
  signal.wait = (...args) => {
    waiting += 1;
    return wait(...args).finally(() => (waiting -= 1));
  };
  return { waiting: () => waiting, until: (n) => eventually(() => waiting >= n && waiting) };
}

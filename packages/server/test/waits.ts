import type { ServiceContext } from '../src/service-context.js';

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
 * Counts the nodes' long polls waiting in this instance (inside `jobSignal.wait`), and node
 * channels standing with a free granted slot (`jobSignal.stand`), so a test can wait until a node
 * is ready for work instead of sleeping. Install it before the nodes start polling.
 *
 * @example
 * const polls = watchPolls(t.ctx);
 * const polled = node.poll({ waitMs: 10_000 });
 * await polls.until(1);
 */
export function watchPolls(ctx: ServiceContext): { waiting(): number; until(n: number): Promise<number> } {
  const signal = ctx.jobSignal;
  const wait = signal.wait.bind(signal);
  const stand = signal.stand.bind(signal);
  let polls = 0;
  const standing = new Set<{ free(): number }>();
  signal.wait = (...args) => {
    polls += 1;
    return wait(...args).finally(() => (polls -= 1));
  };
  signal.stand = (node, slots) => {
    standing.add(slots);
    const unstand = stand(node, slots);
    return () => {
      standing.delete(slots);
      unstand();
    };
  };
  const waiting = () => polls + [...standing].filter((s) => s.free() > 0).length;
  return { waiting, until: (n) => eventually(() => waiting() >= n && waiting()) };
}

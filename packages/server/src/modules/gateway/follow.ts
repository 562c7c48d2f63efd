import type { ServiceContext } from '../../service-context.js';
import type { LocalCompletion, StreamEvent } from './hub.js';
import { workState, type WorkState } from '../work/store.js';

/** What happened next to the work a request follows. */
export type FollowItem =
  | { kind: 'events'; events: StreamEvent[] }
  /** `completion`: handed over in memory by the receipt's handler in this process (else read from the store). */
  | { kind: 'ended'; state: WorkState; completion?: LocalCompletion }
  | { kind: 'timeout' }
  | { kind: 'aborted' };

export interface WorkFollower {
  /** The next item; `timeout` once `deadline` (epoch ms) passes, `aborted` once the signal aborts. */
  next(deadline: number, signal?: AbortSignal): Promise<FollowItem>;
  close(): void;
}

const ENDED = new Set(['completed', 'failed', 'lost', 'cancelled']);

/**
 * Follows one work item: its streamed events as the hub delivers them, and its end (receipt
 * accepted, failed, lease lost, cancelled): handed over by the hub when the receipt was accepted
 * in this process, else read from the store whenever the hub says it changed,
 * and every `pollMs` besides, so a missed message only delays, never loses, the outcome (lease
 * expiry in particular is noticed by the poll).
 *
 * @example
 * const follower = followWork(ctx, workId);
 * const item = await follower.next(Date.now() + 120_000);
 */
export function followWork(
  ctx: Pick<ServiceContext, 'db' | 'hub'>,
  workId: string,
  options: { pollMs?: number } = {},
): WorkFollower {
  const queue: FollowItem[] = [];
  let wake: (() => void) | undefined;
  let ended = false;
  let checking = false;
  let again = false;
  const push = (item: FollowItem) => {
    queue.push(item);
    wake?.();
  };
  const check = async () => {
    if (ended) return;
    if (checking) {
      again = true;
      return;
    }
    checking = true;
    try {
      do {
        again = false;
        const state = await workState(ctx.db, workId);
        if (!ended && state && ENDED.has(state.status)) {
          ended = true;
          push({ kind: 'ended', state });
        }
      } while (again && !ended);
    } catch {
      // The store is briefly unreachable: the next poll tries again.
    } finally {
      checking = false;
    }
  };
  const stopWatching = ctx.hub.watch(workId, (message) => {
    if (message.kind === 'events') {
      if (!ended) push({ kind: 'events', events: message.events });
    } else if (message.kind === 'completed') {
      if (ended) return;
      ended = true;
      push({
        kind: 'ended',
        state: { status: 'completed', error: null, error_retryable: null },
        completion: message.completion,
      });
    } else void check();
  });
  const timer = setInterval(() => void check(), options.pollMs ?? 1_000);
  timer.unref();
  return {
    async next(deadline, signal) {
      for (;;) {
        const item = queue.shift();
        if (item) return item;
        if (signal?.aborted) return { kind: 'aborted' };
        const left = deadline - Date.now();
        if (left <= 0) return { kind: 'timeout' };
        await new Promise<void>((resolve) => {
          const done = () => {
            clearTimeout(t);
            signal?.removeEventListener('abort', done);
            wake = undefined;
            resolve();
          };
          const t = setTimeout(done, left);
          signal?.addEventListener('abort', done, { once: true });
          wake = done;
        });
      }
    },
    close() {
      ended = true;
      clearInterval(timer);
      stopWatching();
    },
  };
}

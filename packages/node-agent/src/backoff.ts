/** Exponential backoff with full jitter, and an abortable sleep. */

/** How a retry loop spaces its attempts. */
export interface BackoffPolicy {
  /** Upper bound of the first delay, in ms. */
  baseMs: number;
  /** Largest delay, in ms. */
  capMs: number;
  /** A number in [0, 1); `Math.random` unless a test fixes it. */
  random?: () => number;
}

/**
 * The delay before retry number `attempt` (0 for the first retry): a uniformly random duration
 * between 0 and `min(capMs, baseMs * 2^attempt)` ("full jitter"), so that many nodes failing at
 * once do not retry in lockstep.
 *
 * @example
 * backoffDelay(3, { baseMs: 500, capMs: 30_000 }); // somewhere in [0, 4000)
 */
export function backoffDelay(attempt: number, policy: BackoffPolicy): number {
  const random = policy.random ?? Math.random;
  const ceiling = Math.min(policy.capMs, policy.baseMs * 2 ** Math.min(attempt, 30));
  return Math.floor(random() * ceiling);
}

/**
 * Something that can end a wait early: it calls `wake` when waiting is no longer worth it (the
 * node's channel reopened, so the server is back) and returns how to stop listening.
 */
export type Sooner = (wake: () => void) => () => void;

/**
 * Waits `ms` milliseconds; rejects with the signal's reason as soon as `signal` aborts, and
 * resolves early when `sooner` wakes it.
 *
 * @example
 * await sleep(1_000, controller.signal);
 */
export function sleep(ms: number, signal?: AbortSignal, sooner?: Sooner): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(abortReason(signal));
      return;
    }
    // Assigned once `sooner` returns: a wake-up during that call stops listening right after it.
    let stopListening: (() => void) | undefined = undefined;
    let ended = false;
    const end = () => {
      ended = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      stopListening?.();
    };
    const onAbort = () => {
      end();
      reject(abortReason(signal));
    };
    const timer = setTimeout(() => {
      end();
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
    stopListening = sooner?.(() => {
      end();
      resolve();
    });
    if (ended) stopListening?.();
  });
}

/**
 * The error to throw for an aborted signal: its reason when that is an Error, else an
 * `AbortError`.
 *
 * @example
 * if (signal.aborted) throw abortReason(signal);
 */
export function abortReason(signal: AbortSignal | undefined): Error {
  const reason: unknown = signal?.reason;
  if (reason instanceof Error) return reason;
  const error = new Error(typeof reason === 'string' ? reason : 'aborted');
  error.name = 'AbortError';
  return error;
}

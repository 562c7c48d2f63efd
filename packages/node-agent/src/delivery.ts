import { backoffDelay, sleep, type BackoffPolicy, type Sooner } from './backoff.js';
import { ControlPlaneError, type NodeClient } from './client.js';
import { resultBody, type OutboxEntry } from './outbox.js';

export interface RetryOptions {
  backoff: BackoffPolicy;
  /** Give up once the next attempt would start later than this after the first (default 2 min). */
  deadlineMs?: number;
  signal?: AbortSignal;
  /**
   * Ends the wait before a retry early: the agent wakes its uploads when its channel reopens, so a
   * receipt that failed while the server was down is sent again at once, not after its backoff.
   */
  sooner?: Sooner;
  /** Told about each failed attempt that will be retried. */
  onRetry?: (error: ControlPlaneError, delayMs: number) => void;
}

export interface DeliveryOptions extends RetryOptions {
  /** Send the result inside the receipt call (one request instead of two): gateway work. */
  inline?: boolean;
}

/** How a retried call ended: done, refused for good (a 4xx), or still failing at the deadline. */
export type RetryResult<T> =
  { ok: true; value: T } | { ok: false; error: ControlPlaneError; final: 'refused' | 'deadline' };

/**
 * Calls `fn` until it succeeds, retrying retryable {@link ControlPlaneError}s (no answer, 408,
 * 425, 429, 5xx) with exponential backoff and full jitter, honouring `Retry-After`. Rethrows
 * aborts and errors that are not ControlPlaneErrors.
 *
 * @example
 * const r = await withRetries(() => client.failWork(id, body), { backoff: { baseMs: 500, capMs: 30_000 } });
 */
export async function withRetries<T>(fn: () => Promise<T>, options: RetryOptions): Promise<RetryResult<T>> {
  const deadline = Date.now() + (options.deadlineMs ?? 120_000);
  // Woken (the channel reopened: the server is back) during a try or a wait: the backoff starts
  // over, so a try that fails once more right after the reconnect (the server still starting) is
  // retried within `baseMs`, not after a wait grown while the server was away.
  let woken = false;
  let wakeSleep: (() => void) | undefined;
  const stopListening = options.sooner?.(() => {
    woken = true;
    wakeSleep?.();
  });
  const local: Sooner | undefined = options.sooner
    ? (wake) => {
        wakeSleep = wake;
        return () => (wakeSleep = undefined);
      }
    : undefined;
  try {
    for (let attempt = 0; ; attempt++) {
      try {
        return { ok: true, value: await fn() };
      } catch (err) {
        if (options.signal?.aborted || !(err instanceof ControlPlaneError)) throw err;
        if (!err.retryable) return { ok: false, error: err, final: 'refused' };
        // Woken while this try was on its way: the next goes at once.
        const wokeDuring = woken;
        woken = false;
        if (wokeDuring) attempt = 0;
        const backoff = wokeDuring ? 0 : backoffDelay(attempt, options.backoff);
        const delay = Math.max(backoff, err.retryAfterMs ?? 0);
        if (Date.now() + delay > deadline) return { ok: false, error: err, final: 'deadline' };
        options.onRetry?.(err, delay);
        await sleep(delay, options.signal, local);
        if (woken) attempt = -1;
        woken = false;
      }
    }
  } finally {
    stopListening?.();
  }
}

/** Outcome of delivering an outbox entry. */
export type Delivery =
  /** `conflicts` holds the 409 answers counted as done (`result: <message>`), for the log. */
  | { outcome: 'delivered'; conflicts: string[] }
  | { outcome: 'refused'; step: 'result' | 'receipt'; error: ControlPlaneError }
  | { outcome: 'pending'; step: 'result' | 'receipt'; error: ControlPlaneError };

/**
 * Uploads an outbox entry: the result, then its receipt, each with {@link withRetries} (with
 * `inline`, one receipt call that carries the result). A `409`
 * counts as done: the agent only ever sends the bytes it wrote to the outbox, so a conflict means
 * an earlier attempt (before a crash or a lost answer) already delivered them. Should the server
 * really hold a different result, the receipt is then refused with `400` and the entry reported
 * `refused`.
 *
 * @example
 * const d = await deliverEntry(client, entry, { backoff: { baseMs: 500, capMs: 30_000 } });
 * if (d.outcome === 'delivered') await outbox.remove(entry.work_id);
 */
export async function deliverEntry(
  client: NodeClient,
  entry: OutboxEntry,
  options: DeliveryOptions,
): Promise<Delivery> {
  const call = { workId: entry.work_id, ...(options.signal ? { signal: options.signal } : {}) };
  const steps: readonly (readonly ['result' | 'receipt', () => Promise<unknown>])[] = options.inline
    ? [['receipt', () => client.submitReceipt({ ...entry.receipt, result: resultBody(entry) }, call)]]
    : [
        ['result', () => client.uploadResult(entry.work_id, resultBody(entry), call)],
        ['receipt', () => client.submitReceipt(entry.receipt, call)],
      ];
  const conflicts: string[] = [];
  for (const [step, send] of steps) {
    const r = await withRetries(async () => {
      try {
        return await send();
      } catch (err) {
        if (!(err instanceof ControlPlaneError) || err.status !== 409) throw err;
        conflicts.push(`${step}: ${err.message}`);
        return undefined;
      }
    }, options);
    if (!r.ok) return { outcome: r.final === 'refused' ? 'refused' : 'pending', step, error: r.error };
  }
  return { outcome: 'delivered', conflicts };
}

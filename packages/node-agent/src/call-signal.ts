/**
 * One outbound call's abort signal: it aborts when the call's time is up or when any of the
 * signals it follows aborts, until the call ends (`done`).
 *
 * Why not `AbortSignal.any([...signals, AbortSignal.timeout(ms)])`: on Node 20 every signal made
 * by `AbortSignal.any` stays in each of its sources' set of dependants for as long as the source
 * lives (nodejs/node#55351, #64476), so combining a long-lived signal (the agent's stop, an
 * engine's close) with each call grew that set by one entry a call, for good; and the timer of
 * `AbortSignal.timeout` runs its whole timeout after the call ended (120 s for an upstream call).
 * Here `done` clears the timer and takes the call out of the sources' calls in flight: a finished
 * call leaves nothing behind.
 */
export interface CallSignal {
  /** Aborts with the first source's reason, or with a `TimeoutError` when the time is up. */
  readonly signal: AbortSignal;
  /** Whether it aborted because the call's time was up (rather than a source aborting). */
  timedOut(): boolean;
  /** The call ended: clears the timer and stops following the sources. Calling it again does nothing. */
  done(): void;
}

/**
 * A signal for one call of at most `timeoutMs`, following `sources` (undefined ones skipped).
 * Already aborted when a source already is, with its reason, as `AbortSignal.any` would be.
 *
 * @example
 * const call = callSignal(30_000, [stop.signal]);
 * try {
 *   return await fetch(url, { signal: call.signal });
 * } finally {
 *   call.done();
 * }
 */
export function callSignal(timeoutMs: number, sources: readonly (AbortSignal | undefined)[]): CallSignal {
  const controller = new AbortController();
  const followed = sources.filter((s): s is AbortSignal => s !== undefined);
  const already = followed.find((s) => s.aborted);
  if (already) {
    controller.abort(already.reason);
    return { signal: controller.signal, timedOut: () => false, done: () => undefined };
  }
  let timedOut = false;
  let ended = false;
  const unfollow: (() => void)[] = [];
  const end = () => {
    if (ended) return;
    ended = true;
    clearTimeout(timer);
    for (const stop of unfollow) stop();
  };
  const abort = (reason: unknown) => {
    end();
    controller.abort(reason);
  };
  for (const source of followed) unfollow.push(follow(source, abort));
  const timer = setTimeout(() => {
    timedOut = true;
    abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError'));
  }, timeoutMs);
  // As AbortSignal.timeout's: a pending call's timer alone does not keep the process alive.
  timer.unref();
  return { signal: controller.signal, timedOut: () => timedOut, done: end };
}

/**
 * The calls in flight that follow each source, behind one `abort` listener per source: a signal
 * that many concurrent calls follow (an engine's close, the agent's stop) carries one listener,
 * not one a call, which would also pass Node's limit of 10 and print a leak warning.
 */
const following = new WeakMap<AbortSignal, Set<(reason: unknown) => void>>();

/** Calls `abort` with the source's reason when it aborts, until the returned function is called. */
function follow(source: AbortSignal, abort: (reason: unknown) => void): () => void {
  const known = following.get(source);
  const calls = known ?? new Set<(reason: unknown) => void>();
  if (known === undefined) {
    following.set(source, calls);
    source.addEventListener(
      'abort',
      () => {
        for (const call of [...calls]) call(source.reason);
        calls.clear();
      },
      { once: true },
    );
  }
  calls.add(abort);
  return () => calls.delete(abort);
}

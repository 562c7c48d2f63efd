import type { BackoffPolicy } from './backoff.js';
import type { NodeClient } from './client.js';
import { withRetries } from './delivery.js';
import type { StreamEventLine } from './wire.js';
import type { ToolCallDeltaWire } from '@svc/protocol';

/** Where a streaming runner sends what it generates (docs/node-protocol.md, "Streamed work"). */
export interface StreamSink {
  /** A piece of generated text; sent in the next batch. */
  delta(content: string): void;
  /** Tool call fragments (OpenAI's `delta.tool_calls`); sent in the next batch, in order with the text. */
  toolCalls?(calls: ToolCallDeltaWire[]): void;
  /** The end of generation: flushes everything, then the `done` line. Rejects if events could not be delivered. */
  done(info: { usage: { prompt_tokens: number; completion_tokens: number }; finish_reason: string }): Promise<void>;
  /** A failure: flushes everything, then the `error` line (best effort; never rejects). */
  error(message: string, retryable: boolean): Promise<void>;
}

export interface StreamSinkOptions {
  /** A batch waits at most this long for more deltas (default 20 ms). */
  flushMs?: number;
  /** A batch is sent once it holds this many deltas (default 16). */
  maxBatch?: number;
  /** The server answered `cancel: true`: the client went away. */
  onCancel: () => void;
  /** Events could not be delivered (refused, or no answer for `deadlineMs`). */
  onFailure?: (error: Error) => void;
  signal?: AbortSignal;
  backoff?: BackoffPolicy;
  /** Retry one batch this long before giving up (default 10 s). */
  deadlineMs?: number;
}

/**
 * Batches a stream's events into signed NDJSON posts: the signature covers the body hash, so a
 * stream is many small bodies, not one endless one. The first delta goes out at once (time to
 * first token); later ones are sent every `flushMs` or every `maxBatch` deltas, one call in
 * flight at a time so order is kept. An answer with `cancel: true` calls `onCancel`.
 *
 * @example
 * const sink = createStreamSink(client, item.work_id, { onCancel: () => controller.abort() });
 * await engine.chat(request, { onDelta: (t) => sink.delta(t) });
 * await sink.done({ usage, finish_reason: 'stop' });
 */
export function createStreamSink(client: NodeClient, workId: string, options: StreamSinkOptions): StreamSink {
  const flushMs = options.flushMs ?? 20;
  const maxBatch = options.maxBatch ?? 16;
  const pending: StreamEventLine[] = [];
  let inFlight: Promise<void> | undefined;
  let timer: NodeJS.Timeout | undefined;
  let sentAny = false;
  let urgent = false;
  let failure: Error | undefined;
  let cancelled = false;

  const stopped = () => failure !== undefined || cancelled || options.signal?.aborted === true;

  async function send(batch: StreamEventLine[]): Promise<void> {
    const r = await withRetries(
      () => client.postEvents(workId, batch, options.signal ? { signal: options.signal } : {}),
      {
        backoff: options.backoff ?? { baseMs: 50, capMs: 1_000 },
        deadlineMs: options.deadlineMs ?? 10_000,
        ...(options.signal ? { signal: options.signal } : {}),
      },
    );
    if (!r.ok) {
      failure = new Error(`stream events were not delivered: ${r.error.message}`);
      options.onFailure?.(failure);
      return;
    }
    if (r.value.cancel && !cancelled) {
      cancelled = true;
      options.onCancel();
    }
  }

  function flush(): void {
    if (timer) clearTimeout(timer);
    timer = undefined;
    if (inFlight) {
      urgent = true;
      return;
    }
    if (pending.length === 0 || stopped()) {
      pending.length = 0;
      return;
    }
    urgent = false;
    sentAny = true;
    inFlight = send(pending.splice(0, pending.length))
      .catch((err: unknown) => {
        if (!options.signal?.aborted) failure = err instanceof Error ? err : new Error(String(err));
      })
      .finally(() => {
        inFlight = undefined;
        if (urgent || pending.length >= maxBatch) flush();
        else if (pending.length > 0) schedule();
      });
  }

  function schedule(): void {
    timer ??= setTimeout(flush, flushMs);
  }

  function push(line: StreamEventLine): void {
    pending.push(line);
    if (!sentAny || pending.length >= maxBatch) flush();
    else schedule();
  }

  async function drain(): Promise<void> {
    flush();
    while (inFlight) await inFlight;
  }

  return {
    delta(content) {
      if (content === '' || stopped()) return;
      push({ type: 'delta', content });
    },
    toolCalls(calls) {
      if (calls.length === 0 || stopped()) return;
      push({ type: 'delta', content: '', tool_calls: calls });
    },
    async done(info) {
      if (!stopped()) pending.push({ type: 'done', usage: info.usage, finish_reason: info.finish_reason });
      await drain();
      if (failure) throw failure;
    },
    async error(message, retryable) {
      if (!stopped()) pending.push({ type: 'error', message: message.slice(0, 2000), retryable });
      await drain().catch(() => undefined);
    },
  };
}

import type { Logger } from 'pino';
import type { Db, Queryable } from './db/index.js';

/**
 * The group-commit writer (DESIGN.md section 4, revised 2026-11-24): record writes that need not
 * hold up an answer are queued here and committed many at a time, one transaction per flush.
 * `enqueue` settles once the flush holding the write committed (or, for a write that failed, once
 * it failed on its own), so a caller that must only act after the commit (the node's ack) waits
 * on it.
 */
export interface Writer {
  /**
   * Queues `write` for the next flush and resolves to its value once that flush committed.
   * Writes run in enqueue order inside the flush's transaction; `write` must only touch `tx`.
   */
  enqueue<T>(write: (tx: Queryable) => Promise<T>): Promise<T>;
  /** Resolves once every write queued so far is committed or failed (flushes at once). */
  settled(): Promise<void>;
  /** Writes queued or being flushed right now. */
  readonly pending: number;
  /** Flushes what is queued, waits for it, and refuses writes from then on (shutdown). */
  close(): Promise<void>;
}

interface Item {
  write: (tx: Queryable) => Promise<unknown>;
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
}

export interface WriterOptions {
  db: Pick<Db, 'transaction'>;
  log: Pick<Logger, 'error' | 'warn'>;
  /** The longest a queued write waits for its flush (SVC_WRITER_FLUSH_MS). */
  flushMs: number;
  /** A flush starts at once when this many writes are queued. */
  maxBatch?: number;
}

/**
 * Builds the writer (one per instance: `ctx.writer`).
 *
 * @example
 * const writer = createWriter({ db, log, flushMs: 2 });
 * await writer.enqueue((tx) => tx.query('UPDATE ...')); // committed once this resolves
 */
export function createWriter(options: WriterOptions): Writer {
  const maxBatch = options.maxBatch ?? 256;
  let queue: Item[] = [];
  let timer: NodeJS.Timeout | undefined;
  let flushing: Promise<void> | undefined;
  // Writes settle in the order they were queued: `done` counts them, so `settled` waits for a
  // mark, not for the queue to be empty (which a busy instance may never be).
  let queued = 0;
  let done = 0;
  let closed = false;

  // One bad write must not lose the others: after a failed flush each write gets its own transaction.
  const runAlone = async (item: Item) => {
    try {
      item.resolve(await options.db.transaction((tx) => item.write(tx)));
    } catch (err) {
      options.log.error({ err }, 'writer: a record write failed');
      item.reject(err);
    }
  };
  const runBatch = async (batch: Item[]) => {
    let values: unknown[];
    try {
      values = await options.db.transaction(async (tx) => {
        const out: unknown[] = [];
        for (const item of batch) out.push(await item.write(tx));
        return out;
      });
    } catch (err) {
      if (batch.length === 1 && batch[0]) {
        options.log.error({ err }, 'writer: a record write failed');
        batch[0].reject(err);
        return;
      }
      options.log.warn({ err, writes: batch.length }, 'writer: a flush failed; retrying its writes one by one');
      for (const item of batch) await runAlone(item);
      return;
    }
    batch.forEach((item, i) => item.resolve(values[i]));
  };
  // Flushes run one after another, so writes commit in the order they were queued.
  const flush = (): Promise<void> => {
    if (timer) clearTimeout(timer);
    timer = undefined;
    if (flushing) return flushing;
    if (queue.length === 0) return Promise.resolve();
    const batch = queue.splice(0, maxBatch);
    flushing = runBatch(batch).finally(() => {
      done += batch.length;
      flushing = undefined;
      if (queue.length >= maxBatch || (closed && queue.length > 0)) void flush();
      else if (queue.length > 0) schedule();
    });
    return flushing;
  };
  const schedule = () => {
    if (!timer && !flushing) timer = setTimeout(() => void flush(), options.flushMs);
  };

  return {
    enqueue<T>(write: (tx: Queryable) => Promise<T>): Promise<T> {
      if (closed) return Promise.reject(new Error('the writer is closed'));
      return new Promise<T>((resolve, reject) => {
        queue.push({ write, resolve: resolve as (value: unknown) => void, reject });
        queued++;
        if (queue.length >= maxBatch) void flush();
        else schedule();
      });
    },
    async settled() {
      const mark = queued;
      while (done < mark) await flush();
    },
    get pending() {
      return queued - done;
    },
    async close() {
      closed = true;
      while (done < queued) await flush();
      queue = [];
    },
  };
}

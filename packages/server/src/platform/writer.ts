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
   * Plain writes run in enqueue order inside the flush's transaction, before its batched kinds;
   * `write` must only touch `tx`.
   */
  enqueue<T>(write: (tx: Queryable) => Promise<T>): Promise<T>;
  /**
   * Queues `item` of a batched kind: a flush hands every queued item of the kind to one
   * `writeMany` call (a few multi-row statements instead of one call per item). Resolves to the
   * item's value once the flush committed. With `waitMs` the item may wait that long (instead of
   * the flush interval) for a flush that other writes bring about: a request's opening waits for
   * its completion, so the two commit in one transaction (any flush takes every queued item).
   */
  enqueueAs<I, T>(kind: WriteKind<I, T>, item: I, options?: { waitMs?: number }): Promise<T>;
  /** Brings the next flush forward to within the flush interval (someone waits for a write that may wait longer). */
  hurry(): void;
  /** Resolves once every write queued so far is committed or failed (flushes at once). */
  settled(): Promise<void>;
  /** Writes queued or being flushed right now. */
  readonly pending: number;
  /** Flushes what is queued, waits for it, and refuses writes from then on (shutdown). */
  close(): Promise<void>;
}

/**
 * A kind of record write that a flush writes many at a time. A flush runs its plain writes first,
 * then each kind in the order its first item was queued, each kind's items in enqueue order, all
 * in the flush's one transaction. Records that must be written in a given order relative to each
 * other belong to one kind, which orders them itself (the gateway's: gateway/flush.ts).
 */
export interface WriteKind<I, T> {
  readonly name: string;
  /**
   * Writes `items` inside `tx` and returns one value per item, in order: a {@link WriteFailure}
   * for an item refused on its own (whose writes the kind rolled back, e.g. to a savepoint), which
   * then rejects alone while the flush commits. Throwing fails the whole flush: each of its items
   * is then written again alone (a batch of one in its own transaction), so one bad item fails alone.
   */
  writeMany(tx: Queryable, items: readonly I[]): Promise<(T | WriteFailure)[]>;
}

/** What `writeMany` returns for an item that failed alone: its promise rejects with `error`. */
export class WriteFailure {
  constructor(readonly error: unknown) {}
}

/** The earliest `due` of a queue (a loop: a queue piled up while the store is away may be too long to spread). */
function earliestDue(queue: readonly Item[]): number {
  let due = Infinity;
  for (const item of queue) due = Math.min(due, item.due);
  return due;
}

interface Item {
  kind: WriteKind<unknown, unknown>;
  value: unknown;
  /** When (`Date.now()`) its flush is due at the latest. */
  due: number;
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
}

type PlainWrite = (tx: Queryable) => Promise<unknown>;

/** Plain `enqueue` writes: each its own call, in enqueue order. */
const plain: WriteKind<PlainWrite, unknown> = {
  name: 'plain',
  async writeMany(tx, writes) {
    const out: unknown[] = [];
    for (const write of writes) out.push(await write(tx));
    return out;
  },
};

/** Writes `batch` grouped by kind (plain writes first, then by first appearance); values in `batch` order. */
async function writeGrouped(tx: Queryable, batch: readonly Item[]): Promise<unknown[]> {
  const groups = new Map<WriteKind<unknown, unknown>, number[]>([[plain as WriteKind<unknown, unknown>, []]]);
  batch.forEach((item, i) => {
    const group = groups.get(item.kind);
    if (group) group.push(i);
    else groups.set(item.kind, [i]);
  });
  const values: unknown[] = new Array(batch.length);
  for (const [kind, indexes] of groups) {
    if (indexes.length === 0) continue;
    const out = await kind.writeMany(
      tx,
      indexes.map((i) => batch[i]?.value),
    );
    if (out.length !== indexes.length)
      throw new Error(`writer: ${kind.name} returned ${out.length} values for ${indexes.length} items`);
    indexes.forEach((i, j) => (values[i] = out[j]));
  }
  return values;
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
 * const rows: WriteKind<number, number> = { name: 'rows', writeMany: (tx, ns) => insertAll(tx, ns) };
 * await Promise.all([writer.enqueueAs(rows, 1), writer.enqueueAs(rows, 2)]); // one insertAll call
 */
export function createWriter(options: WriterOptions): Writer {
  const maxBatch = options.maxBatch ?? 256;
  let queue: Item[] = [];
  let timer: NodeJS.Timeout | undefined;
  let timerDue = 0;
  let flushing: Promise<void> | undefined;
  // Writes settle in the order they were queued: `done` counts them, so `settled` waits for a
  // mark, not for the queue to be empty (which a busy instance may never be).
  let queued = 0;
  let done = 0;
  let closed = false;

  const settle = (item: Item, value: unknown) => {
    if (!(value instanceof WriteFailure)) return item.resolve(value);
    options.log.error({ err: value.error }, 'writer: a record write failed');
    item.reject(value.error);
  };
  // One bad write must not lose the others: after a failed flush each write gets its own transaction.
  const runAlone = async (item: Item) => {
    try {
      const [value] = await options.db.transaction((tx) => writeGrouped(tx, [item]));
      settle(item, value);
    } catch (err) {
      options.log.error({ err }, 'writer: a record write failed');
      item.reject(err);
    }
  };
  const runBatch = async (batch: Item[]) => {
    let values: unknown[];
    try {
      values = await options.db.transaction((tx) => writeGrouped(tx, batch));
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
    batch.forEach((item, i) => settle(item, values[i]));
  };
  // Flushes run one after another, so writes commit in the order they were queued. A flush takes
  // the queue up to its last item that is due, so items still within their wait at its end (the
  // openings of requests still running) stay for the flush their own completion brings; `all`
  // (settled, close, a full batch) takes everything.
  const flush = (all = false): Promise<void> => {
    if (timer) clearTimeout(timer);
    timer = undefined;
    if (flushing) return flushing;
    if (queue.length === 0) return Promise.resolve();
    let end = Math.min(queue.length, maxBatch);
    if (!all && !closed) {
      const horizon = Date.now() + options.flushMs;
      while (end > 0 && (queue[end - 1]?.due ?? 0) > horizon) end--;
      if (end === 0) {
        schedule(earliestDue(queue));
        return Promise.resolve();
      }
    }
    const batch = queue.splice(0, end);
    flushing = runBatch(batch).finally(() => {
      done += batch.length;
      flushing = undefined;
      if (queue.length >= maxBatch || (closed && queue.length > 0)) void flush(true);
      // What was queued meanwhile waits one interval more at least, to gather the next batch.
      else if (queue.length > 0) schedule(Math.max(Date.now() + options.flushMs, earliestDue(queue)));
    });
    return flushing;
  };
  // One timer, set for the earliest due item; a flush in progress reschedules when it ends.
  const schedule = (due: number) => {
    if (flushing || (timer && timerDue <= due)) return;
    if (timer) clearTimeout(timer);
    timerDue = due;
    timer = setTimeout(() => void flush(), Math.max(0, due - Date.now()));
  };

  const push = <T>(kind: WriteKind<unknown, unknown>, value: unknown, waitMs = options.flushMs): Promise<T> => {
    if (closed) return Promise.reject(new Error('the writer is closed'));
    return new Promise<T>((resolve, reject) => {
      const due = Date.now() + waitMs;
      queue.push({ kind, value, due, resolve: resolve as (value: unknown) => void, reject });
      queued++;
      if (queue.length >= maxBatch) void flush(true);
      else schedule(due);
    });
  };

  return {
    enqueue: <T>(write: (tx: Queryable) => Promise<T>) => push<T>(plain as WriteKind<unknown, unknown>, write),
    enqueueAs: <I, T>(kind: WriteKind<I, T>, item: I, opts?: { waitMs?: number }) =>
      push<T>(kind as WriteKind<unknown, unknown>, item, opts?.waitMs),
    hurry() {
      const due = Date.now() + options.flushMs;
      for (const item of queue) item.due = Math.min(item.due, due);
      if (queue.length > 0) schedule(due);
    },
    async settled() {
      const mark = queued;
      while (done < mark) await flush(true);
    },
    get pending() {
      return queued - done;
    },
    async close() {
      closed = true;
      while (done < queued) await flush(true);
      queue = [];
    },
  };
}

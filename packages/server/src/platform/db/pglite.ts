import { assertChannel, type Db, type Queryable, type QueryResult } from './interface.js';
import { paramValue } from './params.js';
import { StoreChannel, type StoreOptions } from './pglite-channel.js';
import { releaseStoreThread, takeStoreThread } from './pglite-threads.js';

/** int8 as a number, refused past 2^53 (both stores; the PGlite thread keeps its own copy). */
export function toSafeNumber(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n)) throw new Error(`int8 value ${value} exceeds the safe integer range`);
  return n;
}

/**
 * A parameter as node-postgres sends it (`paramValue`: text, a Buffer for bytea, or null), made
 * here so that only plain data crosses to the store's thread: Dates, arrays and objects become
 * text. A Buffer that is a view into a larger one is copied, so the clone does not carry all of it.
 */
function wireValue(value: unknown): string | Uint8Array | null {
  const v = paramValue(value);
  return typeof v === 'string' || v === null || v.byteLength === v.buffer.byteLength ? v : new Uint8Array(v);
}

/**
 * Opens the embedded store: PGlite (PostgreSQL compiled to WASM) in `dir`, or in memory for `memory://`.
 * PGlite runs in a worker thread (pglite-worker.mjs), so that its statements, which are CPU work
 * (WASM and its protocol layer), do not hold up the server's event loop. The store behaves as if
 * it ran here: one connection, a transaction's statements never interleaved with others, errors
 * with PostgreSQL's fields. pgvector is loaded, so `CREATE EXTENSION vector` works (knowledge-base
 * search). LISTEN/NOTIFY are served in memory: only this process can open the store, so only it
 * could hear them.
 *
 * @example
 * const db = await createPgliteDb('./.svc/pgdata');
 */
export async function createPgliteDb(dir: string, options: StoreOptions = {}): Promise<Db> {
  // NOTIFY on PGlite only ever reaches this process, so messages are delivered in memory: the
  // same fan-out and order, without a statement (about 0.5 ms) on the one connection per message.
  const listeners = new Map<string, Set<(payload: string) => void>>();
  const deliver = (channel: string, payload: string) => {
    for (const handler of [...(listeners.get(channel) ?? [])]) {
      queueMicrotask(() => {
        try {
          handler(payload);
        } catch {
          // A listener's failure is its own; the others still hear the message.
        }
      });
    }
  };
  const thread = await takeStoreThread();
  // A NOTIFY sent by SQL (a trigger, migrations/0160_nodes_changed.sql) reaches the same
  // listeners, before the statement that committed it answers.
  const store = await StoreChannel.open(thread, dir, deliver, options).catch((err: unknown) => {
    void thread.terminate();
    throw err;
  });
  const listening = new Set<string>();
  const queryable = (tx: number | undefined): Queryable => ({
    query: <Row>(sql: string, params: readonly unknown[] = []) =>
      store.request<QueryResult<Row>>({ op: 'query', sql, params: params.map(wireValue), tx }),
    async exec(sql: string): Promise<void> {
      await store.request({ op: 'exec', sql, tx });
    },
  });
  const outside = queryable(undefined);
  let closing: Promise<void> | undefined;
  return {
    kind: 'pglite',
    query: outside.query,
    exec: outside.exec,
    async transaction(fn) {
      const tx = await store.request<number>({ op: 'begin' });
      let result;
      try {
        result = await fn(queryable(tx));
      } catch (err) {
        await store.request({ op: 'end', tx, commit: false });
        throw err;
      }
      await store.request({ op: 'end', tx, commit: true });
      return result;
    },
    async listen(channel, handler) {
      assertChannel(channel);
      const handlers = listeners.get(channel) ?? new Set();
      listeners.set(channel, handlers);
      // Each subscription is its own entry, so the same function may listen twice.
      const entry = (payload: string) => handler(payload);
      handlers.add(entry);
      if (!listening.has(channel)) {
        listening.add(channel);
        await outside.exec(`LISTEN "${channel}"`);
      }
      return async () => {
        handlers.delete(entry);
      };
    },
    async notify(channel, payload) {
      assertChannel(channel);
      deliver(channel, payload);
    },
    close() {
      closing ??= store.close().then(
        (free) => (free ? releaseStoreThread(thread) : undefined),
        (err: unknown) => {
          void thread.terminate();
          throw err;
        },
      );
      return closing;
    },
  };
}

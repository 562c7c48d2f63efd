import { mkdirSync } from 'node:fs';
import { PGlite, types } from '@electric-sql/pglite';
import { vector } from '@electric-sql/pglite-pgvector';
import { assertChannel, type Db, type Queryable, type QueryResult } from './interface.js';

const parsers = { [types.INT8]: (value: string) => toSafeNumber(value) };

export function toSafeNumber(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n)) throw new Error(`int8 value ${value} exceeds the safe integer range`);
  return n;
}

function wrap(target: Pick<PGlite, 'query' | 'exec'>): Queryable {
  return {
    async query<Row>(sql: string, params: readonly unknown[] = []): Promise<QueryResult<Row>> {
      const result = await target.query<Row>(sql, params as unknown[]);
      return { rows: result.rows, rowCount: result.affectedRows ?? result.rows.length };
    },
    async exec(sql: string): Promise<void> {
      await target.exec(sql);
    },
  };
}

/**
 * Opens the embedded store: PGlite (PostgreSQL compiled to WASM) in `dir`, or in memory for `memory://`.
 * pgvector is loaded, so `CREATE EXTENSION vector` works (knowledge-base search). LISTEN/NOTIFY
 * are served in memory: only this process can open the store, so only it could hear them.
 *
 * @example
 * const db = await createPgliteDb('./.svc/pgdata');
 */
export async function createPgliteDb(dir: string): Promise<Db> {
  if (!dir.startsWith('memory://')) mkdirSync(dir, { recursive: true });
  const pg = await PGlite.create(dir, { parsers, extensions: { vector } });
  const base = wrap(pg);
  // NOTIFY on PGlite only ever reaches this process, so messages are delivered in memory: the
  // same fan-out and order, without a statement (about 0.5 ms) on the one connection per message.
  const listeners = new Map<string, Set<(payload: string) => void>>();
  return {
    kind: 'pglite',
    query: base.query,
    exec: base.exec,
    transaction: (fn) => pg.transaction((tx) => fn(wrap(tx))),
    async listen(channel, handler) {
      assertChannel(channel);
      const handlers = listeners.get(channel) ?? new Set();
      listeners.set(channel, handlers);
      // Each subscription is its own entry, so the same function may listen twice.
      const entry = (payload: string) => handler(payload);
      handlers.add(entry);
      return async () => {
        handlers.delete(entry);
      };
    },
    async notify(channel, payload) {
      assertChannel(channel);
      for (const handler of [...(listeners.get(channel) ?? [])]) {
        queueMicrotask(() => {
          try {
            handler(payload);
          } catch {
            // A listener's failure is its own; the others still hear the message.
          }
        });
      }
    },
    close: () => pg.close(),
  };
}

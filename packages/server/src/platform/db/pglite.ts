import { mkdirSync } from 'node:fs';
import { PGlite, parse, protocol, types, type Results } from '@electric-sql/pglite';
import { vector } from '@electric-sql/pglite-pgvector';
import { prepareValue } from 'pg/lib/utils.js';
import { assertChannel, type Db, type Queryable, type QueryResult } from './interface.js';

const parsers = { [types.INT8]: (value: string) => toSafeNumber(value) };

export function toSafeNumber(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n)) throw new Error(`int8 value ${value} exceeds the safe integer range`);
  return n;
}

const SYNC = protocol.serialize.sync();

/**
 * One parameterised statement in one call into PGlite: Parse, Bind, Describe, Execute and Sync
 * as a single message. `PGlite.query` makes six calls (it first asks for the parameter types to
 * serialize by them), which costs about 150 us more per statement here. Parameters are sent the
 * way node-postgres sends them (`prepareValue`: text, or binary for a Buffer, types inferred by
 * the server), so the same SQL and values behave alike on both stores. The caller holds PGlite's
 * query lock.
 */
async function runStatement<Row>(pg: PGlite, sql: string, params: readonly unknown[]): Promise<Results<Row>> {
  const message = Buffer.concat([
    protocol.serialize.parse({ text: sql }),
    protocol.serialize.bind({ values: params.map((v) => prepareValue(v)) }),
    protocol.serialize.describe({ type: 'P' }),
    protocol.serialize.execute({}),
    SYNC,
  ]);
  const { messages } = await pg.execProtocol(message, { syncToFs: false });
  const [result] = parse.parseResults(messages, pg.parsers);
  if (!result) throw new Error('PGlite returned no result for a statement');
  return result as Results<Row>;
}

function result<Row>(r: Results<Row>): QueryResult<Row> {
  return { rows: r.rows, rowCount: r.affectedRows ?? r.rows.length };
}

/** Statements inside a transaction: the transaction already holds PGlite's transaction lock. */
function inTransaction(pg: PGlite, tx: Pick<PGlite, 'exec'>): Queryable {
  return {
    query: <Row>(sql: string, params: readonly unknown[] = []) => pg._runExclusiveQuery(async () => result(await runStatement<Row>(pg, sql, params))),
    async exec(sql: string): Promise<void> {
      await tx.exec(sql);
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
  // NOTIFY on PGlite only ever reaches this process, so messages are delivered in memory: the
  // same fan-out and order, without a statement (about 0.5 ms) on the one connection per message.
  const listeners = new Map<string, Set<(payload: string) => void>>();
  return {
    kind: 'pglite',
    // Outside a transaction a statement takes the transaction lock too, as `PGlite.query` does.
    query: <Row>(sql: string, params: readonly unknown[] = []) =>
      pg._runExclusiveTransaction(() =>
        pg._runExclusiveQuery(async () => {
          const r = await runStatement<Row>(pg, sql, params);
          await pg.syncToFs();
          return result(r);
        }),
      ),
    async exec(sql: string): Promise<void> {
      await pg.exec(sql);
    },
    transaction: (fn) => pg.transaction((tx) => fn(inTransaction(pg, tx))),
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

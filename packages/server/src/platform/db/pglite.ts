import { mkdirSync } from 'node:fs';
import { PGlite, parse, protocol, types, type Results } from '@electric-sql/pglite';
import { vector } from '@electric-sql/pglite-pgvector';
import { assertChannel, type Db, type Queryable, type QueryResult } from './interface.js';
import { paramValues } from './params.js';

const parsers = { [types.INT8]: (value: string) => toSafeNumber(value) };

export function toSafeNumber(value: string): number {
  const n = Number(value);
  if (!Number.isSafeInteger(n)) throw new Error(`int8 value ${value} exceeds the safe integer range`);
  return n;
}

const SYNC = protocol.serialize.sync();

/** Prepared statements kept per store; past this many the least recently used are closed. */
const MAX_PREPARED = 500;

/**
 * Each distinct SQL text is parsed once into a named prepared statement and then only bound and
 * executed: PostgreSQL skips parsing and analysis on every later run, and after five runs plans
 * it once for all (its `plan_cache_mode = auto`: a generic plan unless that would cost more than
 * the custom ones). Statements the store no longer wants (evicted, or possibly left behind by a
 * failed first run) are closed in front of the next statement; closing a name that does not exist
 * is not an error.
 */
class PreparedStatements {
  private readonly names = new Map<string, string>();
  private readonly toClose: string[] = [];
  private next = 0;

  /** The statement's name, and whether it still has to be parsed. */
  name(sql: string): { name: string; parse: boolean } {
    const known = this.names.get(sql);
    if (known !== undefined) {
      // Most recently used last, so eviction takes the front.
      this.names.delete(sql);
      this.names.set(sql, known);
      return { name: known, parse: false };
    }
    return { name: `svc_${(this.next++).toString(36)}`, parse: true };
  }

  parsed(sql: string, name: string): void {
    this.names.set(sql, name);
    if (this.names.size <= MAX_PREPARED) return;
    const [oldest, oldestName] = this.names.entries().next().value as [string, string];
    this.names.delete(oldest);
    this.toClose.push(oldestName);
  }

  /** A statement that failed: a new one may exist under `name`, or a cached one may be stale. */
  failed(sql: string, name: string, parse: boolean, code: string | undefined): void {
    // 0A000: a cached plan's result type changed under DDL; 26000: no such prepared statement.
    const stale = !parse && (code === '0A000' || code === '26000');
    if (parse || stale) this.toClose.push(name);
    if (stale) this.names.delete(sql);
  }

  /** Close messages owed, to send in front of the next statement. */
  takeCloses(): Uint8Array[] {
    return this.toClose.splice(0).map((name) => protocol.serialize.close({ type: 'S', name }));
  }
}

/**
 * One parameterised statement in one call into PGlite: (Close,) (Parse,) Bind, Describe, Execute
 * and Sync as a single message. `PGlite.query` makes six calls (it first asks for the parameter
 * types to serialize by them), which costs about 150 us more per statement here. Parameters are
 * sent the way node-postgres sends them (`paramValues`: text, or binary for a Buffer, types
 * inferred by the server), so the same SQL and values behave alike on both stores. The caller
 * holds PGlite's query lock.
 */
async function runStatement<Row>(
  pg: PGlite,
  prepared: PreparedStatements,
  sql: string,
  params: readonly unknown[],
): Promise<Results<Row>> {
  const { name, parse: mustParse } = prepared.name(sql);
  const message = Buffer.concat([
    ...prepared.takeCloses(),
    ...(mustParse ? [protocol.serialize.parse({ name, text: sql })] : []),
    protocol.serialize.bind({ statement: name, values: paramValues(params) }),
    protocol.serialize.describe({ type: 'P' }),
    protocol.serialize.execute({}),
    SYNC,
  ]);
  let messages;
  try {
    ({ messages } = await pg.execProtocol(message, { syncToFs: false }));
  } catch (e) {
    prepared.failed(sql, name, mustParse, (e as { code?: string }).code);
    throw e;
  }
  if (mustParse) prepared.parsed(sql, name);
  const [result] = parse.parseResults(messages, pg.parsers);
  if (!result) throw new Error('PGlite returned no result for a statement');
  return result as Results<Row>;
}

function result<Row>(r: Results<Row>): QueryResult<Row> {
  return { rows: r.rows, rowCount: r.affectedRows ?? r.rows.length };
}

/** Statements inside a transaction: the transaction already holds PGlite's transaction lock. */
function inTransaction(pg: PGlite, prepared: PreparedStatements, tx: Pick<PGlite, 'exec'>): Queryable {
  return {
    query: <Row>(sql: string, params: readonly unknown[] = []) =>
      pg._runExclusiveQuery(async () => result(await runStatement<Row>(pg, prepared, sql, params))),
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
  const prepared = new PreparedStatements();
  // A NOTIFY sent by SQL (a trigger, migrations/0160_nodes_changed.sql) reaches the same listeners:
  // PGlite hands it over while the statement that committed it returns.
  const listening = new Set<string>();
  pg.onNotification((channel, payload) => deliver(channel, payload));
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
  return {
    kind: 'pglite',
    // Outside a transaction a statement takes the transaction lock too, as `PGlite.query` does.
    query: <Row>(sql: string, params: readonly unknown[] = []) =>
      pg._runExclusiveTransaction(() =>
        pg._runExclusiveQuery(async () => {
          let r: Results<Row>;
          try {
            r = await runStatement<Row>(pg, prepared, sql, params);
          } catch (e) {
            // DDL changed the shape of a kept statement's result (0A000): it has been dropped, and
            // outside a transaction nothing was done, so the statement runs again, parsed anew.
            if ((e as { code?: string }).code !== '0A000') throw e;
            r = await runStatement<Row>(pg, prepared, sql, params);
          }
          await pg.syncToFs();
          return result(r);
        }),
      ),
    async exec(sql: string): Promise<void> {
      await pg.exec(sql);
    },
    transaction: (fn) => pg.transaction((tx) => fn(inTransaction(pg, prepared, tx))),
    async listen(channel, handler) {
      assertChannel(channel);
      const handlers = listeners.get(channel) ?? new Set();
      listeners.set(channel, handlers);
      // Each subscription is its own entry, so the same function may listen twice.
      const entry = (payload: string) => handler(payload);
      handlers.add(entry);
      if (!listening.has(channel)) {
        listening.add(channel);
        await pg.exec(`LISTEN "${channel}"`);
      }
      return async () => {
        handlers.delete(entry);
      };
    },
    async notify(channel, payload) {
      assertChannel(channel);
      deliver(channel, payload);
    },
    close: () => pg.close(),
  };
}

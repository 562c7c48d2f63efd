import pg from 'pg';
import { assertChannel, type Db, type Queryable, type QueryResult } from './interface.js';
import { paramValues } from './params.js';
import { toSafeNumber } from './pglite.js';

const INT8_OID = 20;
const typeParsers = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === INT8_OID) return (value: string) => toSafeNumber(value);
    return pg.types.getTypeParser(oid, format ?? 'text');
  },
} as pg.CustomTypesConfig;

/** Distinct statement texts kept as named prepared statements; past this many, texts run unnamed. */
const MAX_NAMED = 1000;

/**
 * Names for statement texts, shared by every connection of the pool: node-postgres parses a named
 * statement once per connection and from then on only binds and executes it, so PostgreSQL skips
 * parsing and analysis, and after five runs plans it once for all (as the PGlite store does,
 * pglite.ts). The names are never reused for another text. A text whose prepared plan no longer
 * fits its tables (0A000, after DDL) gets a new name, so it is parsed again.
 */
class StatementNames {
  private readonly names = new Map<string, string>();
  private next = 0;

  of(sql: string): string | undefined {
    const known = this.names.get(sql);
    if (known !== undefined || this.names.size >= MAX_NAMED) return known;
    const name = `svc_${(this.next++).toString(36)}`;
    this.names.set(sql, name);
    return name;
  }

  stale(sql: string): void {
    this.names.delete(sql);
  }
}

function wrap(client: pg.Pool | pg.PoolClient, names: StatementNames, inTransaction: boolean): Queryable {
  const run = (sql: string, params: readonly unknown[]) =>
    client.query({ text: sql, values: paramValues(params), name: names.of(sql) });
  return {
    async query<Row>(sql: string, params: readonly unknown[] = []): Promise<QueryResult<Row>> {
      let result: pg.QueryResult;
      try {
        result = await run(sql, params);
      } catch (err) {
        if ((err as { code?: string }).code !== '0A000') throw err;
        names.stale(sql);
        // Outside a transaction nothing was done: the statement runs again, parsed anew.
        if (inTransaction) throw err;
        result = await run(sql, params);
      }
      return { rows: result.rows as Row[], rowCount: result.rowCount ?? result.rows.length };
    },
    async exec(sql: string): Promise<void> {
      await client.query(sql);
    },
  };
}

export async function createPostgresDb(url: string, options: { max?: number } = {}): Promise<Db> {
  const pool = new pg.Pool({ connectionString: url, max: options.max ?? 10, types: typeParsers });
  pool.on('error', () => undefined); // idle-client errors surface on the next query instead
  await pool.query('SELECT 1');
  const handlers = new Map<string, Set<(payload: string) => void>>();
  let listener: Promise<pg.Client> | undefined;
  let closed = false;

  async function connectListener(): Promise<pg.Client> {
    const client = new pg.Client({ connectionString: url, types: typeParsers });
    client.on('notification', (msg) => {
      for (const handler of [...(handlers.get(msg.channel) ?? [])]) {
        try {
          handler(msg.payload ?? '');
        } catch {
          // A listener's failure is its own; the others still hear the message.
        }
      }
    });
    client.on('error', () => {
      listener = undefined;
      if (!closed) setTimeout(() => void ensureListener().catch(() => undefined), 500).unref();
    });
    await client.connect();
    for (const channel of handlers.keys()) await client.query(`LISTEN "${channel}"`);
    return client;
  }
  // One connection however many subscribe at once: concurrent callers share the one being made.
  async function ensureListener(): Promise<pg.Client> {
    listener ??= connectListener().catch((err: unknown) => {
      listener = undefined;
      throw err;
    });
    return listener;
  }

  const names = new StatementNames();
  const base = wrap(pool, names, false);
  return {
    kind: 'postgres',
    query: base.query,
    exec: base.exec,
    async transaction(fn) {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const result = await fn(wrap(client, names, true));
        await client.query('COMMIT');
        return result;
      } catch (err) {
        await client.query('ROLLBACK').catch(() => undefined);
        throw err;
      } finally {
        client.release();
      }
    },
    async listen(channel, handler) {
      assertChannel(channel);
      const set = handlers.get(channel) ?? new Set();
      const first = set.size === 0;
      set.add(handler);
      handlers.set(channel, set);
      const client = await ensureListener();
      if (first) await client.query(`LISTEN "${channel}"`);
      return async () => {
        set.delete(handler);
        if (set.size === 0) {
          handlers.delete(channel);
          await listener?.then((c) => c.query(`UNLISTEN "${channel}"`)).catch(() => undefined);
        }
      };
    },
    async notify(channel, payload) {
      assertChannel(channel);
      await pool.query('SELECT pg_notify($1, $2)', [channel, payload]);
    },
    async close() {
      closed = true;
      await listener?.then((c) => c.end()).catch(() => undefined);
      await pool.end();
    },
  };
}

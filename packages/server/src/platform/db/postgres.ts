import pg from 'pg';
import { assertChannel, type Db, type Queryable, type QueryResult } from './interface.js';
import { toSafeNumber } from './pglite.js';

const INT8_OID = 20;
const typeParsers = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === INT8_OID) return (value: string) => toSafeNumber(value);
    return pg.types.getTypeParser(oid, format ?? 'text');
  },
} as pg.CustomTypesConfig;

function wrap(client: pg.Pool | pg.PoolClient): Queryable {
  return {
    async query<Row>(sql: string, params: readonly unknown[] = []): Promise<QueryResult<Row>> {
      const result = await client.query(sql, params as unknown[]);
      return { rows: result.rows as Row[], rowCount: result.rowCount ?? result.rows.length };
    },
    async exec(sql: string): Promise<void> {
      await client.query(sql);
    },
  };
}

/**
 * Connects to PostgreSQL. LISTEN uses one dedicated connection, re-established after a drop.
 *
 * @example
 * const db = await createPostgresDb('postgres://svc@127.0.0.1/svc');
 */
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

  const base = wrap(pool);
  return {
    kind: 'postgres',
    query: base.query,
    exec: base.exec,
    async transaction(fn) {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const result = await fn(wrap(client));
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

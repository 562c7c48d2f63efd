import { join } from 'node:path';
import type { Db } from './interface.js';
import { migrate } from './migrate.js';
import { createPgliteDb } from './pglite.js';
import { createPostgresDb } from './postgres.js';

export type { Db, Queryable, QueryResult } from './interface.js';
export { migrate } from './migrate.js';

/**
 * Opens the store the configuration names (PostgreSQL when `databaseUrl` is set, else PGlite in
 * `<dataDir>/pgdata`, with `pgliteBuffersMb` of shared buffers) and brings its schema up to date.
 */
export async function openDb(options: {
  databaseUrl?: string | undefined;
  dataDir: string;
  pgliteBuffersMb?: number | undefined;
}): Promise<Db> {
  const db = options.databaseUrl
    ? await createPostgresDb(options.databaseUrl)
    : await createPgliteDb(join(options.dataDir, 'pgdata'), { buffersMb: options.pgliteBuffersMb });
  try {
    await migrate(db);
  } catch (err) {
    await db.close();
    throw err;
  }
  return db;
}

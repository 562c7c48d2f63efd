import { join } from 'node:path';
import type { Db } from '../src/platform/db/index.js';
import { loadMigrations, migrate } from '../src/platform/db/migrate.js';
import { createPgliteDb } from '../src/platform/db/pglite.js';
import { createPostgresDb } from '../src/platform/db/postgres.js';
import { createTestStore } from './test-store.js';

/** A store whose schema stops before one migration: for a test of that migration over rows written before it. */
export interface StoreBefore {
  db: Db;
  /** Applies the migrations left (the tested one first); returns their versions. */
  migrateRest(): Promise<number[]>;
  /** Closes the store and drops it. */
  close(): Promise<void>;
}

/**
 * Opens a new store of the suite's kind without migrating it (`openDb` would apply every
 * migration at once) and applies the migrations numbered below `version`; the test writes its
 * rows, then calls `migrateRest`.
 *
 * @example
 * const store = await openStoreBefore(30);
 * await store.db.exec("INSERT INTO credit_transactions ...");
 * await store.migrateRest(); // [30, 40, ...]
 */
export async function openStoreBefore(version: number): Promise<StoreBefore> {
  const store = await createTestStore({ empty: true });
  const db = store.databaseUrl
    ? await createPostgresDb(store.databaseUrl)
    : await createPgliteDb(join(store.dataDir, 'pgdata'), { buffersMb: store.pgliteBuffersMb });
  const all = loadMigrations();
  await migrate(
    db,
    all.filter((m) => m.version < version),
  );
  return {
    db,
    migrateRest: () => migrate(db, all),
    async close() {
      await db.close();
      await store.drop();
    },
  };
}

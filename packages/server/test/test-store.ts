import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';

/** A fresh, empty store for one test: a temp data dir, plus its own database when DATABASE_URL is set. */
export interface TestStore {
  dataDir: string;
  databaseUrl: string | undefined;
  drop(): Promise<void>;
}

/** The store the suite runs against: `postgres` when DATABASE_URL is set (CI's second pass), else `pglite`. */
export const TEST_STORE_KIND: 'pglite' | 'postgres' = process.env.DATABASE_URL ? 'postgres' : 'pglite';

/**
 * Makes an isolated store. On PostgreSQL it creates database `svc_t_<random>` next to the one
 * DATABASE_URL names and drops it afterwards, so test files never see each other's rows.
 */
export async function createTestStore(): Promise<TestStore> {
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-test-'));
  const adminUrl = process.env.DATABASE_URL;
  if (!adminUrl) {
    return { dataDir, databaseUrl: undefined, drop: async () => rmSync(dataDir, { recursive: true, force: true }) };
  }
  const name = `svc_t_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    dataDir,
    databaseUrl: url.toString(),
    async drop() {
      rmSync(dataDir, { recursive: true, force: true });
      const client = new pg.Client({ connectionString: adminUrl });
      await client.connect();
      try {
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await client.end();
      }
    },
  };
}

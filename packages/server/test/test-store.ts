import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import {
  adminQuery,
  copyPgliteTemplate,
  PGLITE_TEMPLATE_ENV,
  POSTGRES_TEMPLATE_ENV,
  STORE_ROOT_ENV,
  testPgliteBuffersMb,
} from './store-template.js';

/** A fresh store for one test: a temp data dir, plus its own database when DATABASE_URL is set. */
export interface TestStore {
  dataDir: string;
  databaseUrl: string | undefined;
  /** The embedded store's shared buffers (config.ts), small so that opening it is quick. */
  pgliteBuffersMb: number;
  drop(): Promise<void>;
}

/** The store the suite runs against: `postgres` when DATABASE_URL is set (CI's second pass), else `pglite`. */
export const TEST_STORE_KIND: 'pglite' | 'postgres' = process.env.DATABASE_URL ? 'postgres' : 'pglite';

/**
 * Makes an isolated store. On PostgreSQL it creates database `svc_t_<random>` next to the one
 * DATABASE_URL names and drops it afterwards, so test files never see each other's rows.
 *
 * Under `npm test` the store is already migrated: a copy of the template the global setup built
 * (`store-template.ts`), so opening it applies no migration, and its data dir is in memory when
 * the machine has a tmpfs. Elsewhere (the benches) it starts empty on disk and the first open
 * migrates it, as a new installation does.
 */
export async function createTestStore(options: { empty?: boolean } = {}): Promise<TestStore> {
  const dataDir = mkdtempSync(join(process.env[STORE_ROOT_ENV] ?? tmpdir(), 'svc-test-'));
  const adminUrl = process.env.DATABASE_URL;
  if (!adminUrl) {
    // `empty`: no template, for tests of the migrations themselves.
    const template = options.empty ? undefined : process.env[PGLITE_TEMPLATE_ENV];
    if (template) copyPgliteTemplate(template, join(dataDir, 'pgdata'));
    return {
      dataDir,
      databaseUrl: undefined,
      pgliteBuffersMb: testPgliteBuffersMb(),
      drop: async () => rmSync(dataDir, { recursive: true, force: true }),
    };
  }
  const name = `svc_t_${randomBytes(6).toString('hex')}`;
  const template = options.empty ? undefined : process.env[POSTGRES_TEMPLATE_ENV];
  await adminQuery(adminUrl, template ? `CREATE DATABASE ${name} TEMPLATE ${template}` : `CREATE DATABASE ${name}`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    dataDir,
    databaseUrl: url.toString(),
    pgliteBuffersMb: testPgliteBuffersMb(),
    async drop() {
      rmSync(dataDir, { recursive: true, force: true });
      await adminQuery(adminUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    },
  };
}

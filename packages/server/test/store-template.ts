import { createHash, randomBytes } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, statfsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { createPgliteDb } from '../src/platform/db/pglite.js';
import { createPostgresDb } from '../src/platform/db/postgres.js';
import { loadMigrations, migrate } from '../src/platform/db/migrate.js';

/**
 * Migrated stores the suite copies instead of migrating one per test (about 4 s each on PGlite).
 * Vitest's global setup (`global-setup.ts`) builds them once per run and names them in these
 * variables, which the forked workers inherit; `createTestStore` copies from them when set.
 */
export const PGLITE_TEMPLATE_ENV = 'SVC_TEST_PGLITE_TEMPLATE';
export const POSTGRES_TEMPLATE_ENV = 'SVC_TEST_POSTGRES_TEMPLATE';
/** The embedded store's shared buffers, in MB, for every store a test opens (config.ts). */
export const PGLITE_BUFFERS_ENV = 'SVC_PGLITE_BUFFERS_MB';
export const TEST_PGLITE_BUFFERS_MB = 16;
/** The size this run uses: SVC_PGLITE_BUFFERS_MB when set (to compare sizes), else 16. */
export function testPgliteBuffersMb(): number {
  return Number(process.env[PGLITE_BUFFERS_ENV]) || TEST_PGLITE_BUFFERS_MB;
}
/** Where test stores are made: a directory in memory (tmpfs) for this run, when there is one. */
export const STORE_ROOT_ENV = 'SVC_TEST_STORE_ROOT';

/** Free space a tmpfs must have to hold the run's stores (each about 40 MB, a few at a time). */
const MIN_TMPFS_BYTES = 2 * 1024 ** 3;

const CACHE_DIR = fileURLToPath(new URL('../../../node_modules/.cache/svc-test-stores/', import.meta.url));

/**
 * What a migrated store depends on: every migration's name and text, and the PGlite build that
 * wrote the data directory. A changed, added or removed migration gives another key, so a stale
 * template is never used.
 */
export function templateKey(migrationsDir?: string): string {
  const hash = createHash('sha256').update(
    ['@electric-sql/pglite', '@electric-sql/pglite-pgvector'].map(packageVersion).join('\n'),
  );
  for (const m of loadMigrations(migrationsDir)) hash.update(`\n${m.version}:${m.name}\n${m.sql}`);
  return hash.digest('hex').slice(0, 16);
}

/** The installed version of a package that does not export its package.json. */
function packageVersion(name: string): string {
  let dir = dirname(createRequire(import.meta.url).resolve(name));
  for (;;) {
    const file = join(dir, 'package.json');
    if (existsSync(file)) {
      const pkg = JSON.parse(readFileSync(file, 'utf8')) as { name?: string; version: string };
      if (pkg.name === name) return pkg.version;
    }
    if (dirname(dir) === dir) throw new Error(`no package.json found for ${name}`);
    dir = dirname(dir);
  }
}

/**
 * The path of a migrated PGlite data directory for the current migrations, built on first use
 * and kept under node_modules/.cache between runs. Built beside its final place and renamed, so
 * a concurrent run never copies a half-written one.
 */
export async function pgliteTemplate(cacheDir = CACHE_DIR): Promise<string> {
  const dir = join(cacheDir, `pglite-${templateKey()}`);
  if (existsSync(join(dir, 'PG_VERSION'))) return dir;
  mkdirSync(cacheDir, { recursive: true });
  const building = `${dir}.${process.pid}.${randomBytes(4).toString('hex')}`;
  try {
    const db = await createPgliteDb(building, { buffersMb: testPgliteBuffersMb() });
    try {
      await migrate(db);
    } finally {
      await db.close();
    }
    try {
      renameSync(building, dir);
    } catch (err) {
      // Another run finished first: its copy is as good as ours.
      if (!existsSync(join(dir, 'PG_VERSION'))) throw err;
    }
  } finally {
    rmSync(building, { recursive: true, force: true });
  }
  return dir;
}

/**
 * A directory for this run's stores on /dev/shm when it is a tmpfs with room to spare (copying a
 * store there costs about a tenth of the CPU it costs on ext4, and PGlite's writes stay in
 * memory), else undefined: the stores then go to the OS temp dir. The caller removes it.
 */
export function memoryStoreRoot(): string | undefined {
  const shm = '/dev/shm';
  try {
    const fs = statfsSync(shm);
    if (fs.bavail * fs.bsize < MIN_TMPFS_BYTES) return undefined;
    return mkdtempSync(join(shm, 'svc-test-stores-'));
  } catch {
    return undefined;
  }
}

/** Copies a migrated PGlite data directory to `pgdata` (which must not exist yet). */
export function copyPgliteTemplate(template: string, pgdata: string): void {
  cpSync(template, pgdata, { recursive: true });
}

/**
 * Creates a migrated database on the server `adminUrl` names, marked as a template, and returns
 * its name; `CREATE DATABASE x TEMPLATE <name>` then gives each test a migrated database.
 */
export async function createPostgresTemplate(adminUrl: string): Promise<{ name: string; drop(): Promise<void> }> {
  const name = `svc_tpl_${templateKey()}_${randomBytes(3).toString('hex')}`;
  await adminQuery(adminUrl, `CREATE DATABASE ${name}`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  const db = await createPostgresDb(url.toString(), { max: 1 });
  try {
    await migrate(db);
  } finally {
    await db.close();
  }
  await adminQuery(adminUrl, `ALTER DATABASE ${name} WITH IS_TEMPLATE true`);
  return {
    name,
    async drop() {
      await adminQuery(adminUrl, `ALTER DATABASE ${name} WITH IS_TEMPLATE false`);
      await adminQuery(adminUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    },
  };
}

/** Runs one statement on its own connection (CREATE/DROP DATABASE cannot run in a transaction). */
export async function adminQuery(adminUrl: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

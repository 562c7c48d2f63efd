import { cpSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync, appendFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { openDb } from '../src/platform/db/index.js';
import { createPgliteDb } from '../src/platform/db/pglite.js';
import { createPostgresDb } from '../src/platform/db/postgres.js';
import { loadMigrations, migrate } from '../src/platform/db/migrate.js';
import { PGLITE_TEMPLATE_ENV, pgliteTemplate, templateKey } from './store-template.js';
import { createTestStore, TEST_STORE_KIND } from './test-store.js';

const MIGRATIONS = fileURLToPath(new URL('../migrations/', import.meta.url));

describe('the migrated store template', () => {
  const dirs: string[] = [];
  const tempDir = () => {
    const dir = mkdtempSync(join(tmpdir(), 'svc-tpl-test-'));
    dirs.push(dir);
    return dir;
  };
  afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

  it('is keyed on the migrations: a changed or added migration gives another key', () => {
    const copy = `${tempDir()}/`;
    cpSync(MIGRATIONS, copy, { recursive: true });
    expect(templateKey(copy)).toBe(templateKey());
    const first = readdirSync(copy).sort()[0] ?? '';
    appendFileSync(join(copy, first), '\n-- a change\n');
    const changed = templateKey(copy);
    expect(changed).not.toBe(templateKey());
    writeFileSync(join(copy, '9999_added.sql'), 'SELECT 1;\n');
    expect(templateKey(copy)).not.toBe(changed);
  });

  it('gives every test a store that is already migrated', async () => {
    const store = await createTestStore();
    // Opened without migrating (openDb would migrate): the schema must already be there.
    const db = store.databaseUrl
      ? await createPostgresDb(store.databaseUrl)
      : await createPgliteDb(join(store.dataDir, 'pgdata'), { buffersMb: store.pgliteBuffersMb });
    try {
      const { rows } = await db.query<{ version: number }>('SELECT version FROM schema_migrations ORDER BY version');
      expect(rows.map((r) => r.version)).toEqual(loadMigrations().map((m) => m.version));
      expect(await migrate(db)).toEqual([]);
      // Stores are separate copies: a row in one is not in the next.
      await db.query("INSERT INTO schema_migrations (version, name) VALUES (99999, 'only_here')");
    } finally {
      await db.close();
      await store.drop();
    }
    const next = await createTestStore();
    const db2 = await openDb(next);
    try {
      expect((await db2.query('SELECT 1 FROM schema_migrations WHERE version = 99999')).rows).toEqual([]);
    } finally {
      await db2.close();
      await next.drop();
    }
  });

  it.runIf(TEST_STORE_KIND === 'pglite')(
    'builds the PGlite template once and reuses it while the migrations are unchanged',
    async () => {
      const cache = tempDir();
      const dir = await pgliteTemplate(cache);
      expect(dir).toBe(join(cache, `pglite-${templateKey()}`));
      const built = statSync(join(dir, 'PG_VERSION')).mtimeMs;
      expect(await pgliteTemplate(cache)).toBe(dir);
      expect(statSync(join(dir, 'PG_VERSION')).mtimeMs).toBe(built);
      expect(readdirSync(cache)).toEqual([`pglite-${templateKey()}`]);
      // Under `npm test` the suite's own template is the same build.
      if (process.env[PGLITE_TEMPLATE_ENV])
        expect(process.env[PGLITE_TEMPLATE_ENV]).toMatch(new RegExp(`pglite-${templateKey()}$`));
    },
    // Migrating an empty PGlite store: about 4 s of CPU, several times that on a loaded machine.
    120_000,
  );
});

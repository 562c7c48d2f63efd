import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// One owner per table (STYLE.md): exactly one module's store file holds the statements that write
// or read the table, and every other module calls that module's functions. A table listed here
// with a second statement anywhere in the code (tests and migrations aside) fails this file.
const root = fileURLToPath(new URL('..', import.meta.url));

/** Each table and the one file whose statements name it. */
const OWNERS: Record<string, string> = {
  api_keys: 'packages/server/src/modules/keys/store.ts',
  buyers: 'packages/server/src/modules/auth/store.ts',
  sessions: 'packages/server/src/modules/auth/store.ts',
  memberships: 'packages/server/src/modules/auth/store.ts',
  organizations: 'packages/server/src/modules/auth/store.ts',
  invites: 'packages/server/src/modules/organizations/store.ts',
};

function* codeFiles(dir: string): Generator<string> {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === 'node_modules' || entry.name === 'dist') continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* codeFiles(path);
    else if (/\.(ts|tsx|mts|js|mjs)$/.test(entry.name) && !/\.test\.ts$/.test(entry.name)) yield path;
  }
}

/** Statements (SQL keywords upper-case, as the code writes them) that name `table`, in `text`. */
function statementsOn(table: string, text: string): string[] {
  const re = new RegExp(`\\b(INSERT\\s+INTO|UPDATE|DELETE\\s+FROM|FROM|JOIN)\\s+${table}\\b`, 'g');
  return [...text.matchAll(re)].map((m) => m[0].replace(/\s+/g, ' '));
}

/** `file: STATEMENT table` for every statement on an owned table outside its owner's file. */
function strayStatements(files: { path: string; text: string }[]): string[] {
  const stray: string[] = [];
  for (const { path, text } of files)
    for (const [table, owner] of Object.entries(OWNERS))
      if (path !== owner) for (const s of statementsOn(table, text)) stray.push(`${path}: ${s}`);
  return stray;
}

describe('identity tables have one owner', () => {
  it("no file but the owner's store writes or reads api_keys, buyers, sessions, memberships, organizations, invites", () => {
    const files = ['packages', 'bench'].flatMap((top) =>
      [...codeFiles(join(root, top))].map((file) => ({
        path: relative(root, file),
        text: readFileSync(file, 'utf8'),
      })),
    );
    expect(files.some((f) => f.path === OWNERS.api_keys)).toBe(true);
    expect(strayStatements(files)).toEqual([]);
  });

  it('sees a statement in any form the code writes one, and leaves prose alone', () => {
    const text = `
      await db.query('INSERT INTO sessions (id) VALUES ($1)');
      await db.query(\`UPDATE
        buyers SET name = $2\`);
      const q = 'SELECT k.id FROM api_keys k LEFT JOIN memberships m ON m.org_id = k.org_id';
      await db.query('DELETE FROM invites WHERE id = $1');
      // removes the member from organizations they left; sessions from buyers are ended
      await db.query('SELECT 1 FROM sessions_archive');`;
    expect(strayStatements([{ path: 'packages/server/src/modules/jobs/store.ts', text }])).toEqual([
      'packages/server/src/modules/jobs/store.ts: FROM api_keys',
      'packages/server/src/modules/jobs/store.ts: UPDATE buyers',
      'packages/server/src/modules/jobs/store.ts: INSERT INTO sessions',
      'packages/server/src/modules/jobs/store.ts: JOIN memberships',
      'packages/server/src/modules/jobs/store.ts: DELETE FROM invites',
    ]);
  });
});

import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { buildCliBundle } from './cli-bundle.js';

const cache = fileURLToPath(new URL('../../../node_modules/.cache/svc-cli/', import.meta.url));
mkdirSync(cache, { recursive: true });
const dir = mkdtempSync(join(cache, 'test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The text of `file` and of every file it imports statically (`import ... from "./..."`), transitively. */
function staticallyImported(file: string, seen = new Set<string>()): string {
  if (seen.has(file)) return '';
  seen.add(file);
  const text = readFileSync(file, 'utf8');
  const local = [...text.matchAll(/^import\s+(?:[^;]*?\s+from\s+)?"(\.{1,2}\/[^"]+)"/gm)].map((m) => m[1] as string);
  return [text, ...local.map((rel) => staticallyImported(join(dirname(file), rel), seen))].join('\n');
}

describe('the svc the tests spawn, compiled once per run', () => {
  it('runs without tsx, and paths built from import.meta.url point at the sources', async () => {
    const bin = await buildCliBundle(dir);
    const entry = readFileSync(bin, 'utf8');
    const chunks = readdirSync(join(dir, 'chunks')).map((f) => readFileSync(join(dir, 'chunks', f), 'utf8'));
    const text = [entry, ...chunks].join('\n');
    // Each module keeps its place: the migrations are found beside migrate.ts, as under tsx.
    const migrate = fileURLToPath(new URL('../../server/src/platform/db/migrate.ts', import.meta.url));
    expect(text).toContain(JSON.stringify(pathToFileURL(migrate).href));
    expect(text).not.toContain('import.meta.url');
    // Packages stay imports from node_modules: fastify is not compiled in.
    expect(text).toMatch(/from "fastify"/);
    // Each command is loaded when it runs (packages/cli/src/main.ts): what every `svc` start
    // evaluates (the entry and the chunks it imports statically) holds neither the server nor its packages.
    const eager = staticallyImported(bin);
    expect(eager).not.toMatch(/from "(fastify|@electric-sql\/pglite|pg)"/);
    expect(eager).not.toContain('platform/db/migrate.ts');
    expect(text).toContain('platform/db/migrate.ts');
    const help = spawnSync(process.execPath, [bin, 'help'], { encoding: 'utf8' });
    expect(help.status).toBe(0);
    expect(help.stdout).toContain('svc <command> [options]');
    const unknown = spawnSync(process.execPath, [bin, 'frobnicate'], { encoding: 'utf8' });
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toContain("svc: unknown command 'frobnicate'");
  }, 60_000);
});

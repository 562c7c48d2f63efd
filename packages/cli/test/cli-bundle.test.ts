import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { buildCliBundle } from './cli-bundle.js';

const cache = fileURLToPath(new URL('../../../node_modules/.cache/svc-cli/', import.meta.url));
mkdirSync(cache, { recursive: true });
const dir = mkdtempSync(join(cache, 'test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('the svc the tests spawn, compiled once per run', () => {
  it('runs without tsx, and paths built from import.meta.url point at the sources', async () => {
    const bin = await buildCliBundle(dir);
    const text = readFileSync(bin, 'utf8');
    // Each module keeps its place: the migrations are found beside migrate.ts, as under tsx.
    const migrate = fileURLToPath(new URL('../../server/src/platform/db/migrate.ts', import.meta.url));
    expect(text).toContain(JSON.stringify(pathToFileURL(migrate).href));
    expect(text).not.toContain('import.meta.url');
    // Packages stay imports from node_modules: fastify is not compiled in.
    expect(text).toMatch(/from "fastify"/);
    const help = spawnSync(process.execPath, [bin, 'help'], { encoding: 'utf8' });
    expect(help.status).toBe(0);
    expect(help.stdout).toContain('svc <command> [options]');
    const unknown = spawnSync(process.execPath, [bin, 'frobnicate'], { encoding: 'utf8' });
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toContain("svc: unknown command 'frobnicate'");
  }, 60_000);
});

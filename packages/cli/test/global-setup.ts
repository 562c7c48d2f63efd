import { mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildCliBundle } from './cli-bundle.js';
import { CLI_BUNDLE_ENV } from './spawn.js';

const CACHE_DIR = fileURLToPath(new URL('../../../node_modules/.cache/svc-cli/', import.meta.url));

/**
 * Vitest's global setup: compiles `svc` once for the run (`cli-bundle.ts`), so the `svc`
 * processes the tests spawn skip tsx's per-module loading. Built afresh on every run, from the
 * sources as they are; the workers inherit the variable naming it (`spawnSvc` reads it).
 */
export async function setup(): Promise<() => void> {
  const started = performance.now();
  mkdirSync(CACHE_DIR, { recursive: true });
  const dir = mkdtempSync(join(CACHE_DIR, 'run-'));
  process.env[CLI_BUNDLE_ENV] = await buildCliBundle(dir);
  process.stdout.write(
    `[svc test] svc compiled for spawned processes: ${process.env[CLI_BUNDLE_ENV]} (${Math.round(performance.now() - started)} ms)\n`,
  );
  return () => rmSync(dir, { recursive: true, force: true });
}

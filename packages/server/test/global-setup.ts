import { rmSync } from 'node:fs';
import {
  createPostgresTemplate,
  memoryStoreRoot,
  pgliteTemplate,
  PGLITE_BUFFERS_ENV,
  PGLITE_TEMPLATE_ENV,
  POSTGRES_TEMPLATE_ENV,
  STORE_ROOT_ENV,
  TEST_PGLITE_BUFFERS_MB,
} from './store-template.js';

/**
 * Vitest's global setup: builds the migrated template of the store this run uses, once, before
 * any test file starts. The workers inherit the variable naming it (see `createTestStore`).
 */
export async function setup(): Promise<() => Promise<void>> {
  const started = performance.now();
  // Every store the run opens (in the workers, in the `svc` processes they start) has small
  // shared buffers: PGlite zeroes them at each open, 0.5 s of CPU at its default 128 MB.
  process.env[PGLITE_BUFFERS_ENV] ||= String(TEST_PGLITE_BUFFERS_MB);
  const root = memoryStoreRoot();
  if (root) process.env[STORE_ROOT_ENV] = root;
  const removeRoot = () => (root ? rmSync(root, { recursive: true, force: true }) : undefined);
  const adminUrl = process.env.DATABASE_URL;
  if (!adminUrl) {
    process.env[PGLITE_TEMPLATE_ENV] = await pgliteTemplate();
    report(`PGlite template ${process.env[PGLITE_TEMPLATE_ENV]}, stores in ${root ?? 'the OS temp dir'}`, started);
    return async () => removeRoot();
  }
  const template = await createPostgresTemplate(adminUrl);
  process.env[POSTGRES_TEMPLATE_ENV] = template.name;
  report(`PostgreSQL template database ${template.name}`, started);
  return async () => {
    removeRoot();
    await template.drop();
  };
}

function report(what: string, started: number): void {
  process.stdout.write(`[svc test] migrated store template: ${what} (${Math.round(performance.now() - started)} ms)\n`);
}

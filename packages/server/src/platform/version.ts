import { readFileSync } from 'node:fs';

/** The service version, read once from the root package.json (a deliberate cache). */
export const SERVICE_VERSION: string = (
  JSON.parse(readFileSync(new URL('../../../../package.json', import.meta.url), 'utf8')) as { version: string }
).version;

/** Version of the job specification accepted by `POST /api/v1/marketplace/jobs`. */
export const JOB_SPEC_VERSION = '2026-11-01';

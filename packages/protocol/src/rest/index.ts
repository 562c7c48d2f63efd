// Browser-safe entry (`@svc/protocol/rest`): the REST API's answers the dashboard reads, as TypeBox
// schemas with the `$id` the server registers them under. TypeBox only: no Node.js built-ins in
// this import graph (.dependency-cruiser.cjs rule `rest-is-browser-safe`).
export * from './auth.js';
export * from './billing.js';
export * from './common.js';
export * from './evidence.js';
export * from './gateway.js';
export * from './job-statuses.js';
export * from './jobs.js';
export * from './keys.js';
export * from './nodes.js';
export * from './organizations.js';
export * from './payouts.js';
export * from './system.js';
// The dashboard derives its types from these schemas without a dependency of its own on TypeBox.
export type { Static } from '@sinclair/typebox';

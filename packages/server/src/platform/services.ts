import type { Logger } from 'pino';
import type { AttestationVerifier } from './attestation.js';
import type { BlobStore } from './blobs.js';
import type { Bus } from './bus.js';
import type { Config } from './config.js';
import type { Db } from './db/index.js';
import type { Egress } from './egress.js';
import type { Metrics } from './metrics.js';
import type { ObjectStore } from './objects/index.js';
import type { PaymentProvider } from './payments/index.js';
import type { RateLimiter } from './ratelimit/index.js';
import type { PlatformSecrets } from './secrets.js';
import type { Writer } from './writer.js';

/**
 * The platform half of the service context: stores, transports and guards that belong to no
 * module, built once by `context.ts`. Types only; the module half is `ModulePorts`
 * (`service-context.ts`). A file of platform/ that needs the context takes this, never the whole.
 *
 * @example
 * export function installMetrics(app: FastifyInstance, ctx: PlatformServices): void {}
 */
export interface PlatformServices {
  config: Config;
  db: Db;
  log: Logger;
  secrets: PlatformSecrets;
  metrics: Metrics;
  rateLimiter: RateLimiter;
  bus: Bus;
  blobs: BlobStore;
  /** Large files as streams (capture-set uploads): a data-dir directory or S3 (platform/objects/). */
  objects: ObjectStore;
  attestation: AttestationVerifier;
  /** Payouts and top-ups: Stripe, or the offline `local` provider (docs/payouts.md). */
  payments: PaymentProvider;
  /** The group-commit writer: records written behind the answer, many requests per transaction. */
  writer: Writer;
  /** Every outbound request to a URL a client gave goes through this (the SSRF guard). */
  egress: Egress;
  /** Stops background tasks (lease sweeper, webhook sender) and subscriptions. */
  stopBackground: () => Promise<void>;
  startedAt: Date;
}

import pino, { type DestinationStream, type Logger } from 'pino';
import type { Config } from './platform/config.js';
import { openDb, type Db } from './platform/db/index.js';
import { createMetrics, type Metrics } from './platform/metrics.js';
import { loadPlatformSecrets, type PlatformSecrets } from './platform/secrets.js';

/** Everything a route or service may use, built once at start-up and handed down. */
export interface ServiceContext {
  config: Config;
  db: Db;
  log: Logger;
  secrets: PlatformSecrets;
  metrics: Metrics;
  startedAt: Date;
}

/** Header and field names whose values are replaced by `[redacted]` in every log line. */
export const LOG_REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers["x-api-key"]',
  'req.headers.cookie',
  'headers.authorization',
  'headers["x-api-key"]',
  '*.password',
  '*.api_key',
  '*.token',
  'password',
  'api_key',
  'token',
];

export function createLogger(config: Pick<Config, 'logLevel'>, stream?: DestinationStream): Logger {
  return pino({ level: config.logLevel, redact: { paths: LOG_REDACT_PATHS, censor: '[redacted]' } }, stream);
}

/**
 * Opens the store, applies migrations and loads the platform secrets.
 *
 * @example
 * const ctx = await createContext(loadConfig({}, process.env));
 */
export async function createContext(config: Config, options: { logStream?: DestinationStream } = {}): Promise<ServiceContext> {
  const log = createLogger(config, options.logStream);
  const db = await openDb(config);
  try {
    const secrets = await loadPlatformSecrets(db, config);
    return { config, db, log, secrets, metrics: createMetrics(), startedAt: new Date() };
  } catch (err) {
    await db.close();
    throw err;
  }
}

export async function closeContext(ctx: ServiceContext): Promise<void> {
  await ctx.db.close();
}

import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigError, loadConfig, type Config } from '@svc/server/admin';
import { UsageError } from './args.js';

const PGLITE_LOCK = 'postmaster.pid';

/**
 * The configuration of an administrative command (`svc credits`, `svc keys`) that opens the
 * store directly, or a message saying why it may not: no embedded store at that path, or one
 * another process has open (two writers corrupt PGlite's files; PGlite keeps the lock file while
 * it is open). Bad configuration is a UsageError (exit 2).
 *
 * @example
 * const store = adminStoreConfig('credits', args.flags['data-dir'], 'add credits');
 * if ('refusal' in store) { process.stderr.write(store.refusal); return 1; }
 */
export function adminStoreConfig(
  command: string,
  dataDir: string | boolean | undefined,
  whileRunning: string,
): { config: Config } | { refusal: string } {
  let config: Config;
  try {
    config = loadConfig(typeof dataDir === 'string' ? { 'data-dir': dataDir } : {}, process.env);
  } catch (err) {
    if (err instanceof ConfigError) throw new UsageError(`configuration error: ${err.message}`);
    throw err;
  }
  if (config.databaseUrl) return { config };
  const pgdata = join(config.dataDir, 'pgdata');
  if (!existsSync(pgdata))
    return {
      refusal: `svc ${command}: no embedded store in ${config.dataDir} (no pgdata directory); check --data-dir or set DATABASE_URL\n`,
    };
  if (existsSync(join(pgdata, PGLITE_LOCK))) {
    return {
      refusal:
        `svc ${command}: the embedded store in ${config.dataDir} is open in another process (${join(pgdata, PGLITE_LOCK)} exists).\n` +
        `Stop \`svc serve\` first, or set DATABASE_URL to ${whileRunning} while it runs. If no server is running, it stopped uncleanly:\n` +
        `start and stop \`svc serve\` once, then retry.\n`,
    };
  }
  return { config };
}

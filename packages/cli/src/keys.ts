import { createDbBus, openDb, rotatePlatformKey } from '@svc/server/admin';
import { adminStoreConfig } from './admin-store.js';
import { parseArgs, UsageError } from './args.js';
import { KEYS_USAGE } from './usage.js';

/** Exit codes: 0 rotated, 1 refused (store busy or missing), 2 bad usage or configuration. */
export async function keys(argv: string[]): Promise<number> {
  const args = parseArgs(argv, { values: ['data-dir'], booleans: [] });
  const [sub, ...extra] = args.positionals;
  if (sub !== 'rotate' || extra.length > 0) throw new UsageError(`expected 'rotate'\n\n${KEYS_USAGE}`);
  const store = adminStoreConfig('keys', args.flags['data-dir'], 'rotate');
  if ('refusal' in store) {
    process.stderr.write(store.refusal);
    return 1;
  }
  const { config } = store;
  if (config.signingKeySeedHex)
    throw new UsageError(
      'SVC_SIGNING_KEY is set: the key comes from it; change the variable (the old key is retired at the next start)',
    );
  const db = await openDb(config);
  try {
    const { retired, active } = await rotatePlatformKey(db);
    await createDbBus(db).publish('keys', 'platform');
    if (retired)
      process.stdout.write(
        `retired ${retired.key_id} (${retired.public_key_hex}), valid until ${retired.valid_until?.toISOString() ?? 'now'}\n`,
      );
    process.stdout.write(
      `active  ${active.key_id} (${active.public_key_hex}), valid from ${active.valid_from.toISOString()}\n`,
    );
    return 0;
  } finally {
    await db.close();
  }
}

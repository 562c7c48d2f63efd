import { ApiError, createLedger, openDb } from '@svc/server/admin';
import { centsToCad } from '@svc/protocol';
import { adminStoreConfig } from './admin-store.js';
import { parseArgs, UsageError } from './args.js';
import { CREDITS_USAGE } from './usage.js';

/** Exit codes: 0 done, 1 refused (unknown organization, store busy), 2 bad usage or configuration. */
export async function credits(argv: string[]): Promise<number> {
  const args = parseArgs(argv, { values: ['org', 'cents', 'description', 'data-dir'], booleans: [] });
  const [sub, ...extra] = args.positionals;
  if (sub !== 'add' || extra.length > 0) throw new UsageError(`expected 'add'\n\n${CREDITS_USAGE}`);
  const org = typeof args.flags.org === 'string' ? args.flags.org.trim() : '';
  if (!org) throw new UsageError('--org ORG_ID is required');
  const rawCents = typeof args.flags.cents === 'string' ? args.flags.cents.trim() : '';
  const cents = /^\d+$/.test(rawCents) ? Number(rawCents) : Number.NaN;
  if (!Number.isSafeInteger(cents) || cents < 1)
    throw new UsageError(`--cents must be a positive whole number of cents, got '${rawCents}'`);
  const description =
    typeof args.flags.description === 'string'
      ? args.flags.description
      : 'Credits added by an administrator (svc credits add)';

  const store = adminStoreConfig('credits', args.flags['data-dir'], 'add credits');
  if ('refusal' in store) {
    process.stderr.write(store.refusal);
    return 1;
  }
  const { config } = store;

  const db = await openDb(config);
  try {
    const ledger = createLedger(db);
    const row = await ledger.credit(org, cents, { txType: 'topup', description });
    const balance = await ledger.balance(org);
    process.stdout.write(
      `svc credits: added ${cents} cents (${centsToCad(cents).toFixed(2)} CAD) to ${org} (transaction ${row.id})\n` +
        `balance ${balance.balance_cents} cents (${centsToCad(balance.balance_cents).toFixed(2)} CAD), ` +
        `held ${balance.held_cents}, available ${balance.available_cents}` +
        (balance.debt_cents > 0 ? `, owed ${balance.debt_cents}` : '') +
        '\n',
    );
    return 0;
  } catch (err) {
    if (err instanceof ApiError && err.code === 'not_found') {
      process.stderr.write(
        `svc credits: no organization '${org}' in this store (${db.kind}); check --org, DATABASE_URL and --data-dir\n`,
      );
      return 1;
    }
    if (err instanceof ApiError) throw new UsageError(err.message);
    throw err;
  } finally {
    await db.close();
  }
}

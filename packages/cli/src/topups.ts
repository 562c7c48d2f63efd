import { MICRO_PER_CENT, microToCad } from '@svc/protocol';
import { ApiError, confirmTopup, createLedger, openDb, topupRecord } from '@svc/server/admin';
import { adminStoreConfig } from './admin-store.js';
import { parseArgs, UsageError } from './args.js';
import { TOPUPS_USAGE } from './usage.js';

/** Exit codes: 0 confirmed, 1 refused (unknown or not confirmable top-up, store busy), 2 bad usage or configuration. */
export async function topups(argv: string[]): Promise<number> {
  const args = parseArgs(argv, { values: ['data-dir'], booleans: [] });
  const [sub, ...rest] = args.positionals;
  if (sub !== 'confirm') throw new UsageError(`expected 'confirm'\n\n${TOPUPS_USAGE}`);
  const topupId = rest[0]?.trim() ?? '';
  if (!/^[A-Za-z0-9_-]{1,100}$/.test(topupId) || rest.length > 1) throw new UsageError('confirm needs one TOPUP_ID');

  const store = adminStoreConfig('topups', args.flags['data-dir'], 'confirm top-ups');
  if ('refusal' in store) {
    process.stderr.write(store.refusal);
    return 1;
  }
  const db = await openDb(store.config);
  try {
    const { topup, confirmation } = await confirmTopup({ db, ledger: createLedger(db) }, topupId);
    const confirmed = confirmation.confirmed_micro;
    const spent = topup.amount_cents * MICRO_PER_CENT - confirmed;
    process.stdout.write(
      `${JSON.stringify(topupRecord(topup))}\n` +
        `svc topups: confirmed ${topup.id}: ${microToCad(confirmed).toFixed(2)} CAD of ${topup.org_id}'s credit is now paid credit (transaction ${confirmation.transaction.id})` +
        (spent > 0 ? `; ${microToCad(spent).toFixed(2)} CAD of it had been spent as promotional credit before` : '') +
        '\n',
    );
    return 0;
  } catch (err) {
    if (err instanceof ApiError && err.code === 'not_found') {
      process.stderr.write(
        `svc topups: ${err.message} in this store (${db.kind}); check the id, DATABASE_URL and --data-dir\n`,
      );
      return 1;
    }
    if (err instanceof ApiError && err.code === 'conflict') {
      process.stderr.write(`svc topups: ${err.message}\n`);
      return 1;
    }
    throw err;
  } finally {
    await db.close();
  }
}

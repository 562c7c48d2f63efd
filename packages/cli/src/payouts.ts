import {
  ApiError,
  createEgress,
  createLedger,
  createPaymentProvider,
  loadPlatformSecrets,
  markPayoutPaid,
  openDb,
  payoutRecord,
  runPayouts,
  type PaymentDeps,
} from '@svc/server/admin';
import { adminStoreConfig } from './admin-store.js';
import { parseArgs, UsageError } from './args.js';
import { PAYOUTS_USAGE } from './usage.js';

/** Exit codes: 0 done, 1 refused (store busy, payout not pending), 2 bad usage or configuration. */
export async function payouts(argv: string[]): Promise<number> {
  const args = parseArgs(argv, { values: ['data-dir', 'ref'], booleans: [] });
  const [sub, ...rest] = args.positionals;
  if (sub !== 'run' && sub !== 'mark-paid') throw new UsageError(`expected 'run' or 'mark-paid'\n\n${PAYOUTS_USAGE}`);
  if (sub === 'run' && rest.length > 0) throw new UsageError(`'run' takes no arguments\n\n${PAYOUTS_USAGE}`);
  const payoutId = rest[0]?.trim() ?? '';
  if (sub === 'mark-paid' && (!/^[A-Za-z0-9_-]{1,100}$/.test(payoutId) || rest.length > 1))
    throw new UsageError('mark-paid needs one PAYOUT_ID');
  const ref = typeof args.flags.ref === 'string' ? args.flags.ref.slice(0, 200) : `manual-${new Date().toISOString()}`;

  const store = adminStoreConfig('payouts', args.flags['data-dir'], 'run payouts');
  if ('refusal' in store) {
    process.stderr.write(store.refusal);
    return 1;
  }
  const { config } = store;
  const db = await openDb(config);
  const egress = createEgress({ allowPrivate: config.allowPrivateEgress });
  try {
    if (sub === 'mark-paid') {
      const payout = await markPayoutPaid({ db }, payoutId, ref);
      process.stdout.write(`${JSON.stringify(payoutRecord(payout))}\n`);
      return 0;
    }
    const secrets = await loadPlatformSecrets(db, config);
    const deps: PaymentDeps = {
      db,
      ledger: createLedger(db),
      payments: createPaymentProvider(config, secrets, egress),
      config,
    };
    const report = await runPayouts(deps);
    for (const p of [...report.resent, ...report.created]) process.stdout.write(`${JSON.stringify(payoutRecord(p))}\n`);
    process.stdout.write(
      `svc payouts: ${report.created.length} created, ${report.resent.length} re-sent, ${report.below_minimum} below the minimum (${config.payments.payoutMinimumCents} cents), provider ${deps.payments.name}\n`,
    );
    return 0;
  } catch (err) {
    if (err instanceof ApiError && err.code === 'conflict') {
      process.stderr.write(`svc payouts: ${err.message}\n`);
      return 1;
    }
    throw err;
  } finally {
    await egress.close();
    await db.close();
  }
}

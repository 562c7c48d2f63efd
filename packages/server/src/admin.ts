// What the `svc` administration commands (credits, payouts, keys) use: the store, the ledger, the
// payouts and the platform secrets, without the HTTP application and its dependencies, so that
// such a command starts in a fraction of the time `svc serve` takes (`@svc/server/admin`).
export { ConfigError, loadConfig, type Config } from './platform/config.js';
export { openDb, type Db } from './platform/db/index.js';
export { ApiError } from './platform/errors.js';
export { createLedger } from './modules/billing/service.js';
export { createDbBus } from './platform/bus.js';
export { loadPlatformSecrets, rotatePlatformKey } from './platform/secrets.js';
export { createPaymentProvider } from './platform/payments/index.js';
export { createEgress } from './platform/egress.js';
export {
  confirmTopup,
  markPayoutPaid,
  payoutRecord,
  runPayouts,
  topupRecord,
  type PaymentDeps,
} from './modules/payouts/service.js';

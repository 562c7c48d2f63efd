export { buildApp, type App } from './app.js';
export { closeContext, createContext, type ServiceContext } from './context.js';
export { ConfigError, loadConfig, redactUrl, type Config, type ConfigFlags } from './platform/config.js';
export { startServer, type RunningServer } from './server.js';
export { openDb, type Db } from './platform/db/index.js';
export { ApiError } from './platform/errors.js';
export { createLedger, type Ledger, type LedgerOperations } from './modules/billing/service.js';
export { createDbBus } from './platform/bus.js';
export { rotatePlatformKey } from './platform/secrets.js';

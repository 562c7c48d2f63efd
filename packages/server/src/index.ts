export { buildApp, type App } from './app.js';
export { closeContext, createContext } from './context.js';
export type { ServiceContext } from './service-context.js';
export { redactUrl, type ConfigFlags } from './platform/config.js';
export { startServer, type RunningServer } from './server.js';
export { buildAgentDownload } from './modules/system/agent-download.js';
export { type Ledger, type LedgerOperations } from './modules/billing/service.js';
// The store, ledger, payouts and secrets the administration commands use (also `@svc/server/admin`).
export * from './admin.js';

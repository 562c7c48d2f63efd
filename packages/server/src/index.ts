export { buildApp, type App } from './app.js';
export { closeContext, createContext, type ServiceContext } from './context.js';
export { ConfigError, loadConfig, redactUrl, type Config, type ConfigFlags } from './platform/config.js';
export { startServer, type RunningServer } from './server.js';

import type { DestinationStream } from 'pino';
import { buildApp, type App } from './app.js';
import { closeContext, createContext } from './context.js';
import type { ServiceContext } from './service-context.js';
import type { Config } from './platform/config.js';
import { redactUrl } from './platform/config.js';

export interface RunningServer {
  app: App;
  ctx: ServiceContext;
  url: string;
  /** Stops accepting connections, lets in-flight requests finish (up to the grace period), closes the store. */
  close(): Promise<void>;
}

/**
 * Builds the context and the app and listens on the configured host and port.
 *
 * @example
 * const server = await startServer(loadConfig({}, process.env));
 * console.log(server.url);
 */
export async function startServer(
  config: Config,
  options: { logStream?: DestinationStream; extraRoutes?: (app: App) => void } = {},
): Promise<RunningServer> {
  const ctx = await createContext(config, options);
  let app: App;
  try {
    app = await buildApp(ctx, { extraRoutes: options.extraRoutes });
    await app.listen({ port: config.port, host: config.host });
  } catch (err) {
    await closeContext(ctx);
    throw err;
  }
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const host = config.host.includes(':') ? `[${config.host}]` : config.host;
  const url = `http://${host}:${port}`;
  // An ephemeral port (0) is known only now: links and presigned URLs must name the real one.
  if (config.port === 0 && config.publicUrl === `http://${host}:0`) config.publicUrl = url;
  ctx.log.info(
    { url, store: ctx.db.kind, database: config.databaseUrl ? redactUrl(config.databaseUrl) : config.dataDir },
    'svc serve listening',
  );
  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= (async () => {
      const grace = setTimeout(() => app.server.closeAllConnections(), config.shutdownGraceMs);
      try {
        await app.close();
      } finally {
        clearTimeout(grace);
        await closeContext(ctx);
      }
    })();
    return closing;
  };
  return { app, ctx, url, close };
}

import { buildAgentDownload, ConfigError, loadConfig, startServer } from '@svc/server';
import { parseArgs } from './args.js';
import { logFormat, logStream, startupLines } from './serve-output.js';

/** `svc serve`: starts the server and stops it gracefully on SIGTERM or SIGINT. */
export async function serve(argv: string[]): Promise<number> {
  const args = parseArgs(argv, {
    values: ['port', 'host', 'data-dir', 'public-url', 'log-level'],
    booleans: ['allow-private-egress'],
  });
  let config;
  try {
    config = loadConfig(args.flags as Record<string, string>, process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`svc serve: configuration error: ${err.message}\n`);
      return 2;
    }
    throw err;
  }
  const server = await startServer(config, { logStream: logStream(logFormat(process.stdout)) });
  // The public URL only when one was given: the default is derived from the bind address.
  const publicUrl = args.flags['public-url'] || process.env.SVC_PUBLIC_URL ? config.publicUrl : undefined;
  process.stdout.write(`${startupLines({ url: server.url, publicUrl, store: server.ctx.db.kind }).join('\n')}\n`);
  // The node agent's tarball (GET /api/v1/downloads), built when missing or stale; the server does not wait for it.
  void buildAgentDownload(server.ctx);
  await new Promise<void>((resolve) => {
    const stop = (signal: string) => {
      server.ctx.log.info({ signal }, 'shutting down: draining in-flight requests');
      void server.close().then(resolve, (err: unknown) => {
        server.ctx.log.error({ err }, 'error during shutdown');
        resolve();
      });
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));
  });
  return 0;
}

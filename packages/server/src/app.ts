import Fastify, {
  LogController,
  type FastifyBaseLogger,
  type FastifyReply,
  type FastifyInstance,
  type RawReplyDefaultExpression,
  type RawRequestDefaultExpression,
  type RawServerDefault,
} from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { ServiceContext } from './service-context.js';
import { installAuth } from './modules/auth/hook.js';
import { dashboardPageFallback } from './modules/dashboard/routes.js';
import { installErrorHandling, toApiError } from './platform/http-errors.js';
import { installMetrics } from './platform/http-metrics.js';
import { assertSafeJson, installInputGuard } from './platform/input-guard.js';
import { installOpenApi, registerNamedRouteSchemas } from './platform/openapi.js';
import { requestIdFor } from './platform/request-id.js';
import { installRouteTable } from './platform/route-auth.js';
import { createRouteValidation } from './platform/route-validation.js';
import { cachedSerializerFactory } from './platform/schema-cache.js';
import { registerRoutes } from './routes.js';

/** The Fastify instance with TypeBox types, as every route module receives it. */
export type App = FastifyInstance<
  RawServerDefault,
  RawRequestDefaultExpression,
  RawReplyDefaultExpression,
  FastifyBaseLogger,
  TypeBoxTypeProvider
>;

/**
 * Builds the HTTP application over a ready context. Does not listen; `app.inject()` works at once.
 * `extraRoutes` lets tests mount probe routes; production passes nothing.
 *
 * @example
 * const app = await buildApp(ctx);
 * await app.listen({ port: ctx.config.port, host: ctx.config.host });
 */
export async function buildApp(ctx: ServiceContext, options: { extraRoutes?: (app: App) => void } = {}): Promise<App> {
  const validation = createRouteValidation();
  const app = Fastify({
    loggerInstance: ctx.log as FastifyBaseLogger,
    genReqId: requestIdFor,
    logController: new LogController({ requestIdLogLabel: 'request_id' }),
    bodyLimit: ctx.config.bodyLimitBytes,
    // Only the listed proxies may name the client in X-Forwarded-For (docs/rate-limits.md).
    trustProxy: ctx.config.trustProxy.length > 0 ? ctx.config.trustProxy : false,
    forceCloseConnections: 'idle',
    return503OnClosing: true,
    // Compiled serializers and validators are shared by every app this process builds
    // (platform/schema-cache.ts); svc's validator compiler reaches every plugin's routes through the
    // factory (platform/route-validation.ts).
    schemaController: {
      compilersFactory: { buildSerializer: cachedSerializerFactory(), buildValidator: validation.buildValidator },
    },
    // Errors of the router itself (a malformed percent-encoding, an over-long path parameter)
    // leave in the one error shape too.
    frameworkErrors: (error, _request, raw) => {
      const api = toApiError(error);
      const reply = raw as FastifyReply;
      void reply.code(api.status).type('application/json; charset=utf-8').send(api.toBody());
    },
  }).withTypeProvider<TypeBoxTypeProvider>();
  validation.install(app);
  // JSON bodies keep their exact bytes: node requests are signed over them.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    const raw = body as Buffer;
    request.rawBody = raw;
    parseJson(request, raw.toString('utf8'), (err, parsed) => {
      if (err) return done(err);
      try {
        assertSafeJson(parsed);
      } catch (unsafe) {
        return done(unsafe as Error);
      }
      done(null, parsed);
    });
  });
  installInputGuard(app);
  app.addHook('onRequest', async (request, reply) => {
    void reply.header('x-request-id', request.id);
    if (request.routeOptions.config?.noStore === true) void reply.header('cache-control', 'no-store');
  });
  // Read-your-writes (docs/gateway.md): a read waits for the records queued in this instance's
  // group-commit writer (an answer given before its records committed), none when nothing is queued.
  // Not the node protocol's long-poll and channel: a node reads no records, and must not wait.
  app.addHook('onRequest', async (request) => {
    if (ctx.writer.pending === 0 || (request.method !== 'GET' && request.method !== 'HEAD')) return;
    if (!request.url.startsWith('/api/v1/node/')) await ctx.writer.settled();
  });
  installRouteTable(app);
  installErrorHandling(app, { pageFallback: dashboardPageFallback(ctx) });
  await installOpenApi(app, ctx);
  installAuth(app, ctx);
  installMetrics(app, ctx);
  await registerRoutes(app, ctx);
  options.extraRoutes?.(app);
  registerNamedRouteSchemas(app);
  await app.ready();
  return app;
}

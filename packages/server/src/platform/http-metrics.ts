import { timingSafeEqual } from 'node:crypto';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { PlatformServices } from './services.js';
import { ApiError } from './errors.js';

function isLoopback(address: string | undefined): boolean {
  if (!address) return false;
  return address === '::1' || address.startsWith('127.') || address.startsWith('::ffff:127.');
}

function tokenMatches(header: string | undefined, token: string): boolean {
  const match = /^Bearer (.+)$/.exec(header ?? '');
  if (!match?.[1]) return false;
  const given = Buffer.from(match[1]);
  const wanted = Buffer.from(token);
  return given.length === wanted.length && timingSafeEqual(given, wanted);
}

/**
 * Counts every request by route pattern and status, and serves `GET /metrics` (Prometheus text).
 * The endpoint answers callers on loopback; others need `SVC_METRICS_TOKEN` as a bearer token.
 */
export function installMetrics(app: FastifyInstance, ctx: PlatformServices): void {
  const { httpRequests, httpDuration, registry } = ctx.metrics;
  app.addHook('onResponse', async (request, reply) => {
    const labels = {
      method: request.method,
      route: request.routeOptions.url ?? 'unmatched',
      status: String(reply.statusCode),
    };
    httpRequests.inc(labels);
    httpDuration.observe(labels, reply.elapsedTime / 1000);
  });
  app.get(
    '/metrics',
    {
      config: { auth: { public: true }, rateLimit: false },
      schema: {
        summary: 'Prometheus metrics',
        description:
          'Loopback callers only, unless SVC_METRICS_TOKEN is set and sent as `Authorization: Bearer <token>`.',
        tags: ['service'],
        produces: ['text/plain'],
        response: { 200: Type.String({ description: 'Prometheus text exposition format 0.0.4' }) },
      },
    },
    async (request, reply) => {
      const token = ctx.config.metricsToken;
      const allowed =
        isLoopback(request.socket.remoteAddress) ||
        (token !== undefined && tokenMatches(request.headers.authorization, token));
      if (!allowed) {
        throw token
          ? new ApiError('unauthorized', 'metrics need the bearer token configured as SVC_METRICS_TOKEN')
          : new ApiError(
              'forbidden',
              'metrics are served to loopback callers only; set SVC_METRICS_TOKEN to allow others',
            );
      }
      return reply.type(registry.contentType).send(await registry.metrics());
    },
  );
}

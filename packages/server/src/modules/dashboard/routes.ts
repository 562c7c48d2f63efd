import type { FastifyReply, FastifyRequest } from 'fastify';
import type { App } from '../../app.js';
import type { ServiceContext } from '../../service-context.js';
import { ApiError } from '../../platform/errors.js';
import type { DashboardFiles, StaticFile } from './files.js';

/**
 * First path segments that belong to the API and the service, never to the dashboard: an unknown
 * path under them stays a JSON 404, whatever the client accepts.
 */
const RESERVED_SEGMENTS = new Set(['api', 'v1', 'docs', 'openapi.json', 'metrics', 'mcp', 'assets', '.well-known']);

/**
 * The dashboard's pages may load only what it serves itself (no CDN, nothing inline), and no
 * other site may frame it. `no-referrer` keeps an invite token in the address bar from leaking.
 */
const PAGE_HEADERS = {
  'content-security-policy':
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'",
  'referrer-policy': 'no-referrer',
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
};

const NOT_BUILT = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>SVC: dashboard not built</title></head>
<body><main><h1>The SVC dashboard is not built</h1>
<p>The API is running. To build the web dashboard, run <code>npm install</code> at the repository root
(it builds <code>packages/dashboard</code>), or <code>npm run build -w @svc/dashboard</code>, then restart <code>svc serve</code>.</p>
<p>API reference: <a href="/docs">/docs</a>.</p></main></body></html>
`;

/** True for a path the dashboard's client-side router may own (`/keys`, `/jobs/job_...`, `/invite`). */
export function isDashboardPath(path: string): boolean {
  const first = path.split('?')[0]?.split('/')[1] ?? '';
  if (RESERVED_SEGMENTS.has(first) || first.startsWith('health')) return false;
  return /^(\/[A-Za-z0-9_-]+)*\/?$/.test(path.split('?')[0] ?? '');
}

function send(request: FastifyRequest, reply: FastifyReply, file: StaticFile, cacheControl: string): FastifyReply {
  void reply
    .header('cache-control', cacheControl)
    .header('etag', file.etag)
    .header('vary', 'accept-encoding')
    .type(file.type);
  if (request.headers['if-none-match'] === file.etag) return reply.code(304).send();
  const acceptsGzip = /\bgzip\b/.test(String(request.headers['accept-encoding'] ?? ''));
  if (file.gzip && acceptsGzip) return reply.header('content-encoding', 'gzip').send(file.gzip);
  return reply.send(file.body);
}

function sendPage(request: FastifyRequest, reply: FastifyReply, files: DashboardFiles): FastifyReply {
  void reply.headers(PAGE_HEADERS);
  if (!files.index)
    return reply.code(503).type('text/html; charset=utf-8').header('cache-control', 'no-store').send(NOT_BUILT);
  return send(request, reply, files.index, 'no-cache');
}

/**
 * The single-page fallback for the 404 handler: a browser asking for a dashboard page it has a
 * link to (`/keys`, `/invite?token=...`) gets the app, which routes on the client. API clients,
 * other methods and reserved paths fall through to the JSON 404.
 */
export function dashboardPageFallback(ctx: ServiceContext) {
  return (request: FastifyRequest, reply: FastifyReply): FastifyReply | undefined => {
    if (request.method !== 'GET' && request.method !== 'HEAD') return undefined;
    if (!/text\/html/.test(String(request.headers.accept ?? '')) || !isDashboardPath(request.url)) return undefined;
    return sendPage(request, reply, ctx.dashboard);
  };
}

/** `/` and `/assets/*`: the dashboard's static files, public, outside the API document. */
export async function dashboardRoutes(app: App, ctx: ServiceContext): Promise<void> {
  const config = { auth: { public: true as const }, rateLimit: false };
  app.get('/', { config, schema: { hide: true } }, async (request, reply) => sendPage(request, reply, ctx.dashboard));
  app.get('/assets/*', { config, schema: { hide: true } }, async (request, reply) => {
    const name = (request.params as { '*': string })['*'];
    const file = ctx.dashboard.assets.get(name);
    if (!file) throw new ApiError('not_found', `no dashboard asset ${name}`);
    // Vite names every asset by its content hash: a changed file is a new URL.
    return send(request, reply, file, 'public, max-age=31536000, immutable');
  });
}

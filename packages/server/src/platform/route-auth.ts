import type { FastifyInstance, RouteOptions } from 'fastify';
import type { Permission } from './scopes.js';

/**
 * What a route requires of its caller, declared on every route as `config.auth`:
 * `{ public: true }`, `{ permission: 'jobs:read' }` (granted by scopes: platform/scopes.ts), or
 * `{ node: true }` for calls signed by a registered node's key (docs/node-protocol.md), or
 * `{ authenticated: true }`: any valid key or session, the handler checking each operation's own
 * permission (the MCP endpoint, whose tools each need their REST twin's permission).
 */
export type RouteAuth = { public: true } | { permission: Permission } | { node: true } | { authenticated: true };

/** One registered route, as kept in `app.routeTable` for tests and tooling. */
export interface RouteEntry {
  method: string;
  url: string;
  auth: RouteAuth | undefined;
  hidden: boolean;
  /** The route's own body limit in bytes, when it sets one (else the app's, `SVC_BODY_LIMIT_BYTES`). */
  bodyLimit?: number;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    auth?: RouteAuth;
    /** false exempts a route from rate limits (health checks, metrics scrapes). */
    rateLimit?: boolean;
    /**
     * true for responses that carry a secret (keys, tokens) or a capability URL (a checkout or
     * onboarding page, a presigned file or object URL): sent with `Cache-Control: no-store`.
     */
    noStore?: boolean;
  }
  interface FastifyInstance {
    /** Every route registered on the app, in registration order. */
    routeTable: RouteEntry[];
  }
}

/** Records every route into `app.routeTable`; install before the first route. */
export function installRouteTable(app: FastifyInstance): void {
  const table: RouteEntry[] = [];
  app.decorate('routeTable', table);
  app.addHook('onRoute', (route) => {
    const auth = (route.config as { auth?: RouteAuth } | undefined)?.auth;
    const hidden = (route.schema as { hide?: boolean } | undefined)?.hide === true;
    const limit = route.bodyLimit === undefined ? {} : { bodyLimit: route.bodyLimit };
    for (const method of [route.method].flat()) table.push({ method, url: route.url, auth, hidden, ...limit });
  });
}

/** Refuses to register a route that does not say who may call it (hidden documentation assets aside). */
export function assertRouteDeclaresAuth(route: RouteOptions): void {
  const schema = route.schema as { hide?: boolean } | undefined;
  if (schema?.hide) return;
  const config = route.config as { auth?: RouteAuth } | undefined;
  if (!config?.auth) throw new Error(`route ${String(route.method)} ${route.url} does not declare config.auth`);
}

export function isPublicRoute(config: { auth?: RouteAuth } | undefined): boolean {
  return config?.auth !== undefined && 'public' in config.auth;
}

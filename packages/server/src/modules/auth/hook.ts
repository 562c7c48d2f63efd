import { timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ServiceContext } from '../../service-context.js';
import { addressBucket } from '../../platform/client-address.js';
import { ApiError } from '../../platform/errors.js';
import { randomToken } from '../../platform/ids.js';
import type { RateDecision, RateRule } from '../../platform/ratelimit/index.js';
import { verifyNodeRequest } from '../nodes/node-auth.js';
import { authenticate } from './service.js';
import { scopesGrant } from '../../platform/scopes.js';

const WWW_AUTHENTICATE = { 'www-authenticate': 'Bearer realm="svc"' };

declare module 'fastify' {
  interface FastifyInstance {
    /**
     * This process's secret for calls it makes to itself on behalf of a request already counted
     * against the rate limits (an MCP tool call runs its REST twin through `app.inject`). Sent in
     * {@link INNER_CALL_HEADER}; such a call is authenticated and authorized as usual but not
     * counted again.
     */
    innerCallMark: string;
  }
}

/** The header that carries {@link FastifyInstance.innerCallMark}. */
export const INNER_CALL_HEADER = 'x-svc-inner-call';

/** Whether the request is this process's own call for a request already counted. */
function isInnerCall(request: FastifyRequest, mark: string): boolean {
  const sent = request.headers[INNER_CALL_HEADER];
  if (typeof sent !== 'string' || sent.length !== mark.length) return false;
  return timingSafeEqual(Buffer.from(sent), Buffer.from(mark));
}

/** The credential a request carries: `Authorization: Bearer ...` first, then `X-API-Key`. */
export function credentialOf(request: FastifyRequest): { value: string; via: 'bearer' | 'x-api-key' } | undefined {
  const authorization = request.headers.authorization;
  if (authorization) {
    const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
    return match?.[1] ? { value: match[1], via: 'bearer' } : { value: '', via: 'bearer' };
  }
  const header = request.headers['x-api-key'];
  if (typeof header === 'string' && header) return { value: header.trim(), via: 'x-api-key' };
  return undefined;
}

function setRateHeaders(reply: FastifyReply, decision: RateDecision): void {
  void reply.header('x-ratelimit-limit', decision.limit);
  void reply.header('x-ratelimit-remaining', decision.remaining);
  void reply.header('x-ratelimit-reset', decision.resetSeconds);
}

/** Takes one token from each bucket; reports the one with fewest left, and throws 429 when any is empty. */
export async function enforceRateLimits(
  ctx: ServiceContext,
  reply: FastifyReply,
  buckets: [string, RateRule][],
): Promise<void> {
  const decisions = await Promise.all(buckets.map(([key, rule]) => ctx.rateLimiter.take(key, rule)));
  const denied = decisions.find((d) => !d.allowed);
  const shown = denied ?? decisions.reduce((a, b) => (b.remaining < a.remaining ? b : a));
  setRateHeaders(reply, shown);
  if (denied) {
    throw new ApiError('rate_limited', `rate limit exceeded; retry in ${denied.retryAfterSeconds} s`, undefined, {
      'retry-after': String(denied.retryAfterSeconds),
    });
  }
}

/**
 * The one place access is decided. Every route declares `config.auth`; this hook authenticates
 * the caller, checks the declared permission against the caller's scopes, and applies the rate
 * limits (per key or session, per organization; per client address for public routes).
 */
export function installAuth(app: FastifyInstance, ctx: ServiceContext): void {
  const limits = ctx.config.rateLimits;
  const mark = randomToken(32);
  app.decorate('innerCallMark', mark);
  app.addHook('onRequest', async (request, reply) => {
    const config = request.routeOptions.config;
    const auth = config?.auth;
    if (!auth) return; // unmatched route: the 404 handler answers
    if ('public' in auth) {
      if (config.rateLimit !== false)
        await enforceRateLimits(ctx, reply, [[`ip:${addressBucket(request.ip)}`, limits.anonymous]]);
      return;
    }
    if ('node' in auth) return; // verified once the body is read (preValidation below)
    const credential = credentialOf(request);
    if (!credential) {
      throw new ApiError(
        'unauthorized',
        'missing API key: send Authorization: Bearer <key> or X-API-Key: <key>',
        undefined,
        WWW_AUTHENTICATE,
      );
    }
    const principal = credential.value ? await authenticate(ctx, credential) : undefined;
    if (!principal)
      throw new ApiError(
        'unauthorized',
        'invalid, expired or revoked API key or session token',
        undefined,
        WWW_AUTHENTICATE,
      );
    request.principal = principal;
    if ('permission' in auth && !scopesGrant(principal.scopes, auth.permission)) {
      throw new ApiError(
        'insufficient_scope',
        `this credential's scopes (${principal.scopes.join(', ')}) do not grant ${auth.permission}`,
      );
    }
    if (config.rateLimit === false || isInnerCall(request, mark)) return;
    const caller = principal.keyId ? `key:${principal.keyId}` : `ses:${principal.sessionId ?? principal.buyerId}`;
    await enforceRateLimits(ctx, reply, [
      [caller, limits.key],
      [`org:${principal.orgId}`, limits.org],
    ]);
  });
  // Node signatures cover the body bytes, so they are checked after parsing and before validation.
  app.addHook('preValidation', async (request) => {
    const auth = request.routeOptions.config?.auth;
    if (auth && 'node' in auth) request.node = await verifyNodeRequest(ctx, request);
  });
}

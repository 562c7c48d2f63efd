import type { App } from '../../app.js';
import type { ServiceContext } from '../../service-context.js';
import { addressBucket } from '../../platform/client-address.js';
import { principalOf } from '../../platform/principal.js';
import { enforceRateLimits } from './hook.js';
import { MessageResponse } from '../../platform/schemas.js';
import { AuthRequest, AuthResponse, MeResponse, OrganizationContext } from './schemas.js';
import { login, logout, me, normalizeEmail, signup } from './service.js';

const tags = ['accounts'];

export async function authRoutes(app: App, ctx: ServiceContext): Promise<void> {
  app.addSchema(OrganizationContext);
  app.addSchema(MessageResponse);
  app.post(
    '/api/v1/auth/signup',
    {
      config: { auth: { public: true }, noStore: true },
      schema: {
        summary:
          'Create a buyer account, its organization, a first API key and a session (rate limited per client address)',
        tags,
        body: AuthRequest,
        response: { 201: AuthResponse },
      },
    },
    async (request, reply) => {
      // Each sign-up grants the free tier: limited per client address (docs/billing.md, "Where free-tier credit can go").
      await enforceRateLimits(ctx, reply, [[`signup-ip:${addressBucket(request.ip)}`, ctx.config.rateLimits.signup]]);
      return reply.code(201).send(await signup(ctx, request.body));
    },
  );
  app.post(
    '/api/v1/auth/login',
    {
      config: { auth: { public: true }, noStore: true },
      schema: {
        summary: 'Start a session (rate limited per email and per client address)',
        tags,
        body: AuthRequest,
        response: { 200: AuthResponse },
      },
    },
    async (request, reply) => {
      const rule = ctx.config.rateLimits.login;
      await enforceRateLimits(ctx, reply, [
        [`login-email:${normalizeEmail(request.body.email)}`, rule],
        [`login-ip:${addressBucket(request.ip)}`, rule],
      ]);
      return login(ctx, request.body);
    },
  );
  app.post(
    '/api/v1/auth/logout',
    {
      config: { auth: { permission: 'account:read' } },
      schema: { summary: 'End the current session', tags, response: { 200: MessageResponse } },
    },
    async (request) => logout(ctx, principalOf(request)),
  );
  app.get(
    '/api/v1/auth/me',
    {
      config: { auth: { permission: 'account:read' } },
      schema: { summary: 'The current user and organization', tags, response: { 200: MeResponse } },
    },
    async (request) => me(ctx, principalOf(request)),
  );
}

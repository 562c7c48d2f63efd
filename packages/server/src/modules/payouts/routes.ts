import type { App } from '../../app.js';
import type { ServiceContext } from '../../service-context.js';
import { ApiError } from '../../platform/errors.js';
import { WebhookRejected } from '../../platform/payments/index.js';
import { principalOf, requireManager, type Principal } from '../../platform/principal.js';
import { payableEarnings } from '../billing/service.js';
import { localPageRoutes } from './local-pages.js';
import {
  IdParams,
  NodeConnectCreateRequest,
  NodeConnectCreateResponse,
  NodeConnectOnboardingRequest,
  NodeConnectOnboardingResponse,
  NodeConnectStatusResponse,
  PageQuery,
  Payout,
  PayoutListResponse,
  ProviderParams,
  Topup,
  TopupCreateRequest,
  TopupListResponse,
  WebhookResponse,
} from './schemas.js';
import {
  applyPaymentEvent,
  connectAccount,
  createTopup,
  onboardingUrl,
  payoutRecord,
  topupRecord,
  type PaymentDeps,
} from './service.js';
import { findAccountOfOrg, findTopup, listPayouts, listTopups } from './store.js';

const tags = ['payouts'];

/** Payouts are the organization's money: a key needs the `operator` scope, a session the owner or admin role. */
function requirePayoutManager(principal: Principal): void {
  if (principal.kind === 'session') requireManager(principal, 'manage payouts');
}

export async function payoutRoutes(app: App, ctx: ServiceContext): Promise<void> {
  const deps: PaymentDeps = {
    db: ctx.db,
    ledger: ctx.ledger,
    payments: ctx.payments,
    config: ctx.config,
    log: ctx.log,
  };
  app.addSchema(Payout);
  app.addSchema(Topup);

  app.post(
    '/api/v1/node/connect',
    {
      config: { auth: { permission: 'payouts:write' } },
      schema: {
        summary:
          "Creates the organization's payout account at the payment provider (one per organization; a second call returns it)",
        tags,
        body: NodeConnectCreateRequest,
        response: { 200: NodeConnectCreateResponse, 201: NodeConnectCreateResponse },
      },
    },
    async (request, reply) => {
      const principal = principalOf(request);
      requirePayoutManager(principal);
      const { account, created } = await connectAccount(deps, principal.orgId, request.body);
      return reply
        .code(created ? 201 : 200)
        .send({ account_id: account.account_id, provider: account.provider, onboarded: account.onboarded });
    },
  );
  app.post(
    '/api/v1/node/connect/onboarding',
    {
      config: { auth: { permission: 'payouts:write' }, noStore: true },
      schema: {
        summary: 'A fresh onboarding link for the payout account',
        tags,
        body: NodeConnectOnboardingRequest,
        response: { 200: NodeConnectOnboardingResponse },
      },
    },
    async (request) => {
      const principal = principalOf(request);
      requirePayoutManager(principal);
      return { url: await onboardingUrl(deps, principal.orgId, request.body.account_id) };
    },
  );
  app.get(
    '/api/v1/node/connect/status',
    {
      config: { auth: { permission: 'payouts:read' } },
      schema: { summary: "The payout account's onboarding state", tags, response: { 200: NodeConnectStatusResponse } },
    },
    async (request) => {
      const principal = principalOf(request);
      requirePayoutManager(principal);
      const account = await findAccountOfOrg(ctx.db, principal.orgId);
      return {
        account_id: account?.account_id ?? null,
        onboarded: account?.onboarded ?? false,
        provider: ctx.payments.name,
        moves_real_money: ctx.payments.movesRealMoney,
      };
    },
  );
  app.get(
    '/api/v1/payouts',
    {
      config: { auth: { permission: 'payouts:read' } },
      schema: {
        summary: "The organization's payouts, newest first, and what is payable now",
        tags,
        querystring: PageQuery,
        response: { 200: PayoutListResponse },
      },
    },
    async (request) => {
      const principal = principalOf(request);
      requirePayoutManager(principal);
      const { limit = 50, offset = 0 } = request.query;
      const [page, payable] = await Promise.all([
        listPayouts(ctx.db, principal.orgId, { limit, offset }),
        payableEarnings(ctx.db, principal.orgId).then((p) => p.payable_cents),
      ]);
      return {
        payouts: page.rows.map(payoutRecord),
        total: page.total,
        limit,
        offset,
        payable_cents: payable,
        minimum_cents: ctx.config.payments.payoutMinimumCents,
        provider: ctx.payments.name,
        moves_real_money: ctx.payments.movesRealMoney,
      };
    },
  );

  app.post(
    '/api/v1/billing/topups',
    {
      config: { auth: { permission: 'billing:write' }, noStore: true },
      schema: {
        summary:
          'Starts a top-up: returns the checkout page; the credit is added once, when the payment provider confirms',
        tags: ['billing'],
        body: TopupCreateRequest,
        response: { 201: Topup },
      },
    },
    async (request, reply) => {
      const principal = principalOf(request);
      const row = await createTopup(deps, principal, request.body.amount_cents);
      return reply.code(201).send(topupRecord(row));
    },
  );
  app.get(
    '/api/v1/billing/topups',
    {
      config: { auth: { permission: 'billing:read' }, noStore: true },
      schema: {
        summary: "The organization's top-ups, newest first",
        tags: ['billing'],
        querystring: PageQuery,
        response: { 200: TopupListResponse },
      },
    },
    async (request) => {
      const { limit = 50, offset = 0 } = request.query;
      const page = await listTopups(ctx.db, principalOf(request).orgId, { limit, offset });
      return { topups: page.rows.map(topupRecord), total: page.total, limit, offset };
    },
  );
  app.get(
    '/api/v1/billing/topups/:id',
    {
      config: { auth: { permission: 'billing:read' }, noStore: true },
      schema: { summary: 'One top-up and its state', tags: ['billing'], params: IdParams, response: { 200: Topup } },
    },
    async (request) => {
      const row = await findTopup(ctx.db, request.params.id, { orgId: principalOf(request).orgId });
      if (!row) throw new ApiError('not_found', `top-up ${request.params.id} not found`);
      return topupRecord(row);
    },
  );

  app.post(
    '/api/v1/webhooks/payments/:provider',
    {
      config: { auth: { public: true } },
      schema: {
        summary:
          "The payment provider's events, verified with its own signature scheme (Stripe-Signature for `stripe`); replays change nothing",
        tags,
        params: ProviderParams,
        response: { 200: WebhookResponse },
      },
    },
    async (request) => {
      if (request.params.provider !== ctx.payments.name)
        throw new ApiError('not_found', `no payment provider '${request.params.provider}' on this server`);
      const raw = request.rawBody;
      if (!raw) throw new ApiError('invalid_request', 'a webhook body must be JSON');
      let event;
      try {
        event = ctx.payments.parseWebhook(raw, request.headers);
      } catch (err) {
        if (err instanceof WebhookRejected) throw new ApiError('invalid_request', `webhook refused: ${err.message}`);
        throw err;
      }
      return { received: true, outcome: await applyPaymentEvent(deps, event) };
    },
  );

  await localPageRoutes(app, ctx, deps);
}

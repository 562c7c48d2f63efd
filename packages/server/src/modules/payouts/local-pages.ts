import { randomBytes } from 'node:crypto';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import { centsToCad } from '@svc/protocol';
import type { App } from '../../app.js';
import type { PlatformServices } from '../../platform/services.js';
import { ApiError } from '../../platform/errors.js';
import type { LocalPage, LocalPaymentProvider, PaymentEvent } from '../../platform/payments/index.js';
import { StringEnum } from '../../platform/schemas.js';
import { applyPaymentEvent, type PaymentDeps } from './service.js';
import { findTopup } from './store.js';

/**
 * The `local` provider's onboarding and checkout pages (docs/payouts.md). Their links are
 * presigned (`expires`, `signature`); submitting one builds a signed provider event and hands it to
 * the same verification and the same {@link applyPaymentEvent} as a webhook. No money moves.
 */

const Params = Type.Object({
  page: StringEnum(['onboarding', 'checkout'] as const),
  id: Type.String({ minLength: 1, maxLength: 100 }),
});
const Query = Type.Object({
  expires: Type.Optional(Type.String({ maxLength: 20 })),
  signature: Type.Optional(Type.String({ maxLength: 80 })),
  return: Type.Optional(Type.String({ maxLength: 2000 })),
});

function escape(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${escape(title)}</title><style>body{font:16px system-ui,sans-serif;max-width:36rem;margin:3rem auto;padding:0 1rem}
.warn{background:#fff4d6;border:1px solid #e0b100;padding:.75rem 1rem;border-radius:.5rem}button{font:inherit;padding:.5rem 1rem;margin-right:.5rem}</style></head>
<body><main><h1>${escape(title)}</h1><p class="warn" role="note"><strong>Local payment provider:</strong> no real money moves. This page stands in for a real provider's page so that a server without one works end to end.</p>${body}</main></body></html>`;
}

/** Only back into this server: a return URL elsewhere is dropped (no open redirect). */
function safeReturn(ctx: PlatformServices, raw: string | undefined): string {
  if (raw && raw.startsWith(`${ctx.config.publicUrl}/`)) return raw;
  return `${ctx.config.publicUrl}/`;
}

function isLocal(provider: PlatformServices['payments']): provider is LocalPaymentProvider {
  return provider.name === 'local';
}

async function describe(
  ctx: PlatformServices,
  kind: LocalPage,
  id: string,
): Promise<{ title: string; text: string; actions: [string, string][] }> {
  if (kind === 'onboarding') {
    return {
      title: 'Payout onboarding',
      text: `Payout account <code>${escape(id)}</code>. Submitting marks it onboarded; payouts to it are recorded as pending until an administrator marks them paid (<code>svc payouts mark-paid</code>).`,
      actions: [['complete', 'Complete onboarding']],
    };
  }
  const topup = await findTopup(ctx.db, id);
  if (!topup) throw new ApiError('not_found', `top-up ${id} not found`);
  return {
    title: 'Checkout',
    text: `Top-up <code>${escape(id)}</code>: <strong>${centsToCad(topup.amount_cents).toFixed(2)} ${escape(topup.currency)}</strong> of credit (status: ${escape(topup.status)}). Paying here adds promotional credit: it buys compute, but what it pays a node is never paid out, until an administrator confirms the payment (<code>svc topups confirm ${escape(id)}</code>).`,
    actions:
      topup.status === 'pending'
        ? [
            ['pay', 'Pay'],
            ['cancel', 'Cancel'],
          ]
        : [],
  };
}

async function eventFor(ctx: PlatformServices, kind: LocalPage, id: string, action: string): Promise<PaymentEvent> {
  const eventId = `evt_local_${randomBytes(12).toString('hex')}`;
  if (kind === 'onboarding') return { id: eventId, type: 'account.updated', accountId: id, onboarded: true };
  const topup = await findTopup(ctx.db, id);
  if (!topup) throw new ApiError('not_found', `top-up ${id} not found`);
  const sessionId = topup.provider_ref ?? '';
  if (action === 'cancel') return { id: eventId, type: 'checkout.expired', sessionId, topupId: id };
  return {
    id: eventId,
    type: 'checkout.completed',
    sessionId,
    topupId: id,
    amountCents: topup.amount_cents,
    currency: topup.currency,
    paid: true,
  };
}

export async function localPageRoutes(app: App, ctx: PlatformServices, deps: PaymentDeps): Promise<void> {
  await app.register(async (plugin) => {
    const scope = plugin.withTypeProvider<TypeBoxTypeProvider>();
    // The pages' forms post url-encoded; only these routes accept that.
    scope.addContentTypeParser(
      'application/x-www-form-urlencoded',
      { parseAs: 'string', bodyLimit: 1024 },
      (_request, body, done) => {
        done(null, Object.fromEntries(new URLSearchParams(String(body))));
      },
    );
    const checked = (params: { page: LocalPage; id: string }, query: { expires?: string; signature?: string }) => {
      const provider = ctx.payments;
      if (!isLocal(provider))
        throw new ApiError('not_found', 'the local payment provider is not in use on this server');
      const verdict = provider.checkPage(params.page, params.id, query);
      if (verdict !== 'ok')
        throw new ApiError(
          verdict === 'expired' ? 'forbidden' : 'not_found',
          verdict === 'expired' ? 'this link has expired; ask for a new one' : 'no such page',
        );
      return provider;
    };

    scope.get(
      '/pay/local/:page/:id',
      { config: { auth: { public: true } }, schema: { hide: true, params: Params, querystring: Query } },
      async (request, reply) => {
        checked(request.params, request.query);
        const { title, text, actions } = await describe(ctx, request.params.page, request.params.id);
        const buttons = actions
          .map(([value, label]) => `<button type="submit" name="action" value="${value}">${escape(label)}</button>`)
          .join('');
        const form = buttons
          ? `<form method="post">${buttons}</form>`
          : `<p><a href="${escape(safeReturn(ctx, request.query.return))}">Back to SVC</a></p>`;
        return reply
          .type('text/html; charset=utf-8')
          .header('cache-control', 'no-store')
          .send(page(title, `<p>${text}</p>${form}`));
      },
    );

    scope.post(
      '/pay/local/:page/:id',
      {
        config: { auth: { public: true } },
        schema: {
          hide: true,
          params: Params,
          querystring: Query,
          body: Type.Optional(Type.Object({ action: Type.Optional(Type.String({ maxLength: 20 })) })),
        },
      },
      async (request, reply) => {
        const provider = checked(request.params, request.query);
        const event = await eventFor(ctx, request.params.page, request.params.id, request.body?.action ?? 'pay');
        // The same path as a provider's webhook: signed, verified, applied at most once.
        const signed = provider.signEvent(event);
        await applyPaymentEvent(deps, provider.parseWebhook(signed.rawBody, signed.headers));
        return reply.redirect(safeReturn(ctx, request.query.return), 303);
      },
    );
  });
}

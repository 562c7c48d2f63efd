import Stripe from 'stripe';
import type { Egress } from '../egress.js';
import { WEBHOOK_TOLERANCE_SECONDS, WebhookRejected, type PaymentEvent, type PaymentProvider } from './interface.js';

export interface StripeOptions {
  secretKey: string;
  webhookSecret: string;
  /** Where the SDK sends its requests; unset is Stripe's API. Tests point it at a local fake. */
  apiBase?: string;
  /** The fetch the SDK sends its requests with: the platform's egress guard (`ctx.egress.fetch`). */
  fetch?: Egress['fetch'];
}

/** The part of a Stripe object the platform reads. */
interface StripeObject {
  id?: string;
  details_submitted?: boolean;
  payouts_enabled?: boolean;
  client_reference_id?: string | null;
  metadata?: Record<string, string> | null;
  amount_total?: number | null;
  currency?: string | null;
  payment_status?: string;
}

function sdkConfig(options: StripeOptions): ConstructorParameters<typeof Stripe>[1] {
  const { apiBase } = options;
  const config: NonNullable<ConstructorParameters<typeof Stripe>[1]> = {
    maxNetworkRetries: 2,
    timeout: 30_000,
    // Like every outbound request of the server, the SDK's go through the egress guard.
    ...(options.fetch ? { httpClient: Stripe.createFetchHttpClient(options.fetch as typeof fetch) } : {}),
  };
  if (!apiBase) return config;
  const url = new URL(apiBase);
  return {
    ...config,
    host: url.hostname,
    port: url.port || (url.protocol === 'https:' ? 443 : 80),
    protocol: url.protocol === 'http:' ? 'http' : 'https',
  };
}

function header(headers: Record<string, string | string[] | undefined>, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/**
 * Stripe Connect (Express accounts) for operators' payouts and Checkout Sessions for top-ups,
 * through the official SDK. Every call that creates something carries an idempotency key derived
 * from our own id, so a retry (the SDK's, or ours after a crash) creates it once.
 *
 * @example
 * const stripe = createStripeProvider({ secretKey: 'sk_test_...', webhookSecret: 'whsec_...' });
 * const { accountId } = await stripe.createAccount({ orgId, email: 'op@example.com', country: 'CA' });
 */
export function createStripeProvider(options: StripeOptions): PaymentProvider {
  const stripe = new Stripe(options.secretKey, sdkConfig(options));
  return {
    name: 'stripe',
    movesRealMoney: true,

    async createAccount({ orgId, email, country }) {
      const account = await stripe.accounts.create(
        {
          type: 'express',
          email,
          country,
          capabilities: { transfers: { requested: true } },
          metadata: { org_id: orgId },
        },
        { idempotencyKey: `svc-account-${orgId}` },
      );
      return { accountId: account.id };
    },

    async onboardingLink({ accountId, returnUrl, refreshUrl }) {
      const link = await stripe.accountLinks.create({
        account: accountId,
        type: 'account_onboarding',
        return_url: returnUrl,
        refresh_url: refreshUrl,
      });
      return { url: link.url };
    },

    async createCheckout({ topupId, orgId, amountCents, currency, successUrl, cancelUrl }) {
      const session = await stripe.checkout.sessions.create(
        {
          mode: 'payment',
          client_reference_id: topupId,
          metadata: { topup_id: topupId, org_id: orgId },
          line_items: [
            {
              quantity: 1,
              price_data: {
                currency: currency.toLowerCase(),
                unit_amount: amountCents,
                product_data: { name: 'SVC credits' },
              },
            },
          ],
          success_url: successUrl,
          cancel_url: cancelUrl,
        },
        { idempotencyKey: `svc-topup-${topupId}` },
      );
      if (!session.url) throw new Error(`Stripe returned checkout session ${session.id} without a URL`);
      return { sessionId: session.id, url: session.url };
    },

    async transfer({ payoutId, accountId, amountCents, currency, idempotencyKey }) {
      const transfer = await stripe.transfers.create(
        {
          amount: amountCents,
          currency: currency.toLowerCase(),
          destination: accountId,
          transfer_group: payoutId,
          metadata: { payout_id: payoutId },
        },
        { idempotencyKey },
      );
      return { ref: transfer.id, status: 'paid' };
    },

    parseWebhook(rawBody, headers, now = new Date()) {
      const signature = header(headers, 'stripe-signature');
      if (!signature) throw new WebhookRejected('missing Stripe-Signature header');
      let event: { id: string; type: string; data: { object: unknown } };
      try {
        event = stripe.webhooks.constructEvent(
          rawBody,
          signature,
          options.webhookSecret,
          WEBHOOK_TOLERANCE_SECONDS,
          undefined,
          now.getTime(),
        );
      } catch (err) {
        throw new WebhookRejected(err instanceof Error ? err.message : 'signature verification failed');
      }
      return toPaymentEvent(event.id, event.type, event.data.object as StripeObject);
    },
  };
}

/** Maps the Stripe events the platform acts on; every other type is acknowledged and ignored. */
export function toPaymentEvent(id: string, type: string, object: StripeObject): PaymentEvent {
  const topupId = object.client_reference_id ?? object.metadata?.topup_id ?? '';
  switch (type) {
    case 'account.updated':
      return {
        id,
        type: 'account.updated',
        accountId: object.id ?? '',
        onboarded: object.details_submitted === true && object.payouts_enabled === true,
      };
    case 'checkout.session.completed':
    case 'checkout.session.async_payment_succeeded':
      return {
        id,
        type: 'checkout.completed',
        sessionId: object.id ?? '',
        topupId,
        amountCents: object.amount_total ?? 0,
        currency: (object.currency ?? '').toUpperCase(),
        paid: object.payment_status === 'paid' || object.payment_status === 'no_payment_required',
      };
    case 'checkout.session.expired':
    case 'checkout.session.async_payment_failed':
      return { id, type: 'checkout.expired', sessionId: object.id ?? '', topupId };
    default:
      return { id, type: 'ignored', providerType: type };
  }
}

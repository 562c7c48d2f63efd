import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { WEBHOOK_TOLERANCE_SECONDS, WebhookRejected, type PaymentEvent, type PaymentProvider } from './interface.js';

/** The header a local event's signature travels in: `t=<unix s>,v1=<hex HMAC-SHA256(key, t + "." + body)>`. */
export const LOCAL_SIGNATURE_HEADER = 'svc-local-signature';

/** How long a local onboarding or checkout page link stays valid. */
const PAGE_TTL_SECONDS = 24 * 3600;

export type LocalPage = 'onboarding' | 'checkout';

/**
 * The offline provider (the embedded default): it moves no money. Its onboarding and checkout
 * "pages" are served by `svc serve` itself (modules/payouts/local-pages.ts) at presigned URLs;
 * submitting one produces a signed event that goes through the same webhook path as Stripe's.
 * Payouts stay `pending` until whoever pays by hand runs `svc payouts mark-paid`.
 */
export interface LocalPaymentProvider extends PaymentProvider {
  readonly name: 'local';
  /** A signed event body and its headers, as the webhook route receives them. */
  signEvent(event: PaymentEvent, now?: Date): { rawBody: Buffer; headers: Record<string, string> };
  /** `ok`, `expired` or `invalid` for a page link's query. */
  checkPage(
    page: LocalPage,
    id: string,
    query: { expires?: string; signature?: string },
    now?: Date,
  ): 'ok' | 'expired' | 'invalid';
}

/**
 * @example
 * const local = createLocalProvider({ publicUrl: () => config.publicUrl, key });
 * const { url } = await local.onboardingLink({ accountId, returnUrl, refreshUrl }); // a page of svc serve
 */
export function createLocalProvider(options: { publicUrl: () => string; key: Buffer }): LocalPaymentProvider {
  const mac = (data: string) => createHmac('sha256', options.key).update(data).digest('hex');
  const pageUrl = (page: LocalPage, id: string, back: string) => {
    const expires = Math.floor(Date.now() / 1000) + PAGE_TTL_SECONDS;
    const signature = mac(`page\n${page}\n${id}\n${expires}`);
    return `${options.publicUrl()}/pay/local/${page}/${encodeURIComponent(id)}?expires=${expires}&signature=${signature}&return=${encodeURIComponent(back)}`;
  };
  return {
    name: 'local',
    movesRealMoney: false,

    async createAccount() {
      return { accountId: `acct_local_${randomBytes(9).toString('hex')}` };
    },
    async onboardingLink({ accountId, returnUrl }) {
      return { url: pageUrl('onboarding', accountId, returnUrl) };
    },
    async createCheckout({ topupId, successUrl }) {
      return { sessionId: `cs_local_${topupId}`, url: pageUrl('checkout', topupId, successUrl) };
    },
    async transfer({ payoutId }) {
      return { ref: `tr_local_${payoutId}`, status: 'pending' };
    },

    signEvent(event, now = new Date()) {
      const rawBody = Buffer.from(JSON.stringify(event), 'utf8');
      const t = Math.floor(now.getTime() / 1000);
      return {
        rawBody,
        headers: {
          'content-type': 'application/json',
          [LOCAL_SIGNATURE_HEADER]: `t=${t},v1=${mac(`${t}.${rawBody.toString('utf8')}`)}`,
        },
      };
    },

    parseWebhook(rawBody, headers, now = new Date()) {
      const raw = headers[LOCAL_SIGNATURE_HEADER];
      const value = Array.isArray(raw) ? raw[0] : raw;
      const match = /^t=(\d{1,12}),v1=([0-9a-f]{64})$/.exec(value ?? '');
      if (!match) throw new WebhookRejected(`missing or malformed ${LOCAL_SIGNATURE_HEADER} header`);
      const [, t = '0', given = ''] = match;
      const expected = Buffer.from(mac(`${t}.${rawBody.toString('utf8')}`), 'hex');
      if (!timingSafeEqual(expected, Buffer.from(given, 'hex')))
        throw new WebhookRejected('signature does not match the body');
      if (Math.abs(now.getTime() / 1000 - Number(t)) > WEBHOOK_TOLERANCE_SECONDS)
        throw new WebhookRejected('event timestamp outside the tolerance');
      let event: unknown;
      try {
        event = JSON.parse(rawBody.toString('utf8'));
      } catch {
        throw new WebhookRejected('body is not JSON');
      }
      return parseLocalEvent(event);
    },

    checkPage(page, id, query, now = new Date()) {
      const { expires, signature } = query;
      if (!expires || !/^\d{1,12}$/.test(expires) || !signature || !/^[0-9a-f]{64}$/.test(signature)) return 'invalid';
      const expected = Buffer.from(mac(`page\n${page}\n${id}\n${expires}`), 'hex');
      if (!timingSafeEqual(expected, Buffer.from(signature, 'hex'))) return 'invalid';
      return Number(expires) * 1000 < now.getTime() ? 'expired' : 'ok';
    },
  };
}

function parseLocalEvent(value: unknown): PaymentEvent {
  const e = value as Record<string, unknown>;
  const str = (k: string) => (typeof e[k] === 'string' ? (e[k] as string) : '');
  if (typeof e !== 'object' || e === null || !str('id')) throw new WebhookRejected('event has no id');
  switch (e.type) {
    case 'account.updated':
      return { id: str('id'), type: 'account.updated', accountId: str('accountId'), onboarded: e.onboarded === true };
    case 'checkout.completed':
      return {
        id: str('id'),
        type: 'checkout.completed',
        sessionId: str('sessionId'),
        topupId: str('topupId'),
        amountCents: Number(e.amountCents),
        currency: str('currency'),
        paid: e.paid === true,
      };
    case 'checkout.expired':
      return { id: str('id'), type: 'checkout.expired', sessionId: str('sessionId'), topupId: str('topupId') };
    default:
      return { id: str('id'), type: 'ignored', providerType: String(e.type) };
  }
}

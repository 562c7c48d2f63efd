/**
 * The part of a payment provider the platform calls (DESIGN.md section 7, docs/payouts.md):
 * payout accounts for operators, onboarding links, checkout for buyers' top-ups, transfers for
 * payouts, and the provider's signed events. Two implementations: `stripe` (Stripe Connect through
 * the official SDK) and `local` (offline; moves no money; its pages are served by `svc serve`).
 */
export interface PaymentProvider {
  readonly name: 'stripe' | 'local';
  /** False for `local`: the dashboard says so on every payment page. */
  readonly movesRealMoney: boolean;
  createAccount(input: { orgId: string; email: string; country: string }): Promise<{ accountId: string }>;
  /** A fresh link where the operator completes onboarding at the provider. */
  onboardingLink(input: { accountId: string; returnUrl: string; refreshUrl: string }): Promise<{ url: string }>;
  /** A checkout page where the buyer pays `amountCents`; `topupId` comes back in the confirmation event. */
  createCheckout(input: {
    topupId: string;
    orgId: string;
    amountCents: number;
    currency: string;
    successUrl: string;
    cancelUrl: string;
  }): Promise<{ sessionId: string; url: string }>;
  /**
   * Sends a payout. The provider deduplicates on `idempotencyKey` (derived from the payout id), so
   * a retry after a crash never pays twice. `paid`: the money left; `pending`: the provider (or a
   * person, for `local`) confirms later.
   */
  transfer(input: {
    payoutId: string;
    accountId: string;
    amountCents: number;
    currency: string;
    idempotencyKey: string;
  }): Promise<{ ref: string; status: 'paid' | 'pending' }>;
  /**
   * Verifies a webhook with the provider's own scheme and returns what it says. Throws
   * {@link WebhookRejected} for an unsigned, badly signed or stale event.
   */
  parseWebhook(rawBody: Buffer, headers: Record<string, string | string[] | undefined>, now?: Date): PaymentEvent;
}

/** What a provider's event means to the platform; other event types are acknowledged and ignored. */
export type PaymentEvent =
  | { id: string; type: 'account.updated'; accountId: string; onboarded: boolean }
  | {
      id: string;
      type: 'checkout.completed';
      sessionId: string;
      topupId: string;
      amountCents: number;
      currency: string;
      paid: boolean;
    }
  | { id: string; type: 'checkout.expired'; sessionId: string; topupId: string }
  | { id: string; type: 'ignored'; providerType: string };

/** A webhook that does not verify: refused with 400 and changes nothing. */
export class WebhookRejected extends Error {
  override name = 'WebhookRejected';
}

/** Webhook events older (or newer) than this are refused as stale, as Stripe's SDK does by default. */
export const WEBHOOK_TOLERANCE_SECONDS = 300;

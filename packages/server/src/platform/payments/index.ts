import { createHmac } from 'node:crypto';
import type { PaymentsConfig } from '../config.js';
import type { Egress } from '../egress.js';
import type { PlatformSecrets } from '../secrets.js';
import type { PaymentProvider } from './interface.js';
import { createLocalProvider } from './local.js';
import { createStripeProvider } from './stripe.js';

export { WebhookRejected, type PaymentEvent, type PaymentProvider } from './interface.js';
export { LOCAL_SIGNATURE_HEADER, type LocalPage, type LocalPaymentProvider } from './local.js';

/**
 * The provider the configuration names: Stripe when `SVC_STRIPE_SECRET_KEY` is set (or
 * `SVC_PAYMENT_PROVIDER=stripe`), else the offline `local` one, whose signing key is derived from
 * the platform's session secret so every instance sharing the database agrees.
 */
export function createPaymentProvider(
  config: { payments: PaymentsConfig; publicUrl: string },
  secrets: Pick<PlatformSecrets, 'sessionSecret'>,
  egress: Pick<Egress, 'fetch'>,
): PaymentProvider {
  const { payments } = config;
  if (payments.provider === 'stripe' && payments.stripe)
    return createStripeProvider({ ...payments.stripe, fetch: egress.fetch });
  const key = createHmac('sha256', secrets.sessionSecret).update('svc-local-payments-v1').digest();
  // Read at each link: `svc serve --port 0` learns its URL only once it listens.
  return createLocalProvider({ publicUrl: () => config.publicUrl, key });
}

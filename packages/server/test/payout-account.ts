import type { App } from '../src/app.js';
import type { Ledger } from '../src/modules/billing/service.js';
import type { PaymentDeps } from '../src/modules/payouts/service.js';
import { bearer, createKey, createTestApp, type TestApp, type TestBuyer } from './harness.js';

/** The environment of a payout test: no scheduled run (the test runs them), payouts from 1 CAD. */
export const PAYOUT_TEST_ENV = { SVC_PAYOUT_INTERVAL: 'off', SVC_PAYOUT_MINIMUM_CENTS: '100' };

/**
 * A test app for payout runs, and what the payout functions take from it.
 *
 * @example
 * const { t, deps } = await createPayoutTestApp();
 * await runPayouts(deps);
 */
export async function createPayoutTestApp(): Promise<{ t: TestApp; deps: PaymentDeps }> {
  const t = await createTestApp({ env: PAYOUT_TEST_ENV });
  return { t, deps: { db: t.ctx.db, ledger: t.ctx.ledger, payments: t.ctx.payments, config: t.ctx.config } };
}

/**
 * The operator of issue 40's probe, on top of its sign-up grant (500 cents, promotional): 850
 * cents earned from free-tier work (promotional) and 1,000 from paid work. 2,350 cents, 1,000 of
 * them paid credit.
 *
 * @example
 * await earnLikeTheProbe(t.ctx.ledger, operator.orgId);
 */
export async function earnLikeTheProbe(ledger: Ledger, orgId: string): Promise<void> {
  await ledger.earn(
    orgId,
    { charged_micro: 10_000_000, free_micro: 10_000_000, charged_cents: 1_000 },
    {
      ref: 'job_free_tier',
    },
  );
  await ledger.earn(orgId, { charged_micro: 11_770_000, free_micro: 0, charged_cents: 1_177 }, { ref: 'job_paid' });
}

/** The path and query of a page `svc serve` itself serves (the local provider's), for `app.inject`. */
export function localPage(url: string): string {
  const u = new URL(url);
  return `${u.pathname}${u.search}`;
}

const FORM = { 'content-type': 'application/x-www-form-urlencoded' };

/**
 * Connects the buyer's organization to the `local` payment provider and onboards it through the
 * provider's own page, as an operator would; returns the operator key it made and the account.
 *
 * @example
 * const { operatorKey } = await onboardLocally(t.app, await signUp(t.app));
 */
export async function onboardLocally(app: App, buyer: TestBuyer): Promise<{ operatorKey: string; accountId: string }> {
  const operatorKey = await createKey(app, buyer, ['operator'], 'payouts');
  const connect = await app.inject({
    method: 'POST',
    url: '/api/v1/node/connect',
    headers: bearer(operatorKey),
    payload: { email: buyer.email, country: 'CA' },
  });
  if (connect.statusCode !== 201) throw new Error(`connect failed: ${connect.statusCode} ${connect.body}`);
  const accountId = (connect.json() as { account_id: string }).account_id;
  const link = await app.inject({
    method: 'POST',
    url: '/api/v1/node/connect/onboarding',
    headers: bearer(operatorKey),
    payload: { account_id: accountId },
  });
  const { url } = link.json() as { url: string };
  const done = await app.inject({ method: 'POST', url: localPage(url), headers: FORM, payload: 'action=complete' });
  if (done.statusCode !== 303) throw new Error(`onboarding failed: ${done.statusCode} ${done.body}`);
  return { operatorKey, accountId };
}

/**
 * A top-up of `cents` that the buyer pays itself on the `local` provider's checkout page (its
 * `action=pay`, which anyone can submit); returns the top-up's id.
 *
 * @example
 * const topupId = await payLocalTopup(t.app, buyer, 1_000);
 */
export async function payLocalTopup(app: App, buyer: TestBuyer, cents: number): Promise<string> {
  const created = await app.inject({
    method: 'POST',
    url: '/api/v1/billing/topups',
    headers: bearer(buyer.apiKey),
    payload: { amount_cents: cents },
  });
  if (created.statusCode !== 201) throw new Error(`top-up failed: ${created.statusCode} ${created.body}`);
  const topup = created.json() as { topup_id: string; checkout_url: string };
  const paid = await app.inject({
    method: 'POST',
    url: localPage(topup.checkout_url),
    headers: FORM,
    payload: 'action=pay',
  });
  if (paid.statusCode !== 303) throw new Error(`checkout failed: ${paid.statusCode} ${paid.body}`);
  return topup.topup_id;
}

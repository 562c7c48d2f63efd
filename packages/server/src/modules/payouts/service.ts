import type { Logger } from 'pino';
import { centsToCad, MICRO_PER_CENT } from '@svc/protocol';
import type { Config } from '../../platform/config.js';
import type { Db, Queryable } from '../../platform/db/index.js';
import { ApiError } from '../../platform/errors.js';
import { newId } from '../../platform/ids.js';
import type { PaymentEvent, PaymentProvider } from '../../platform/payments/index.js';
import type { Confirmation, Ledger } from '../billing/service.js';
import {
  closeTopup,
  confirmTopupRow,
  failPayout,
  findAccountOfOrg,
  findTopup,
  insertAccount,
  insertPayout,
  insertTopup,
  lockOrgPayouts,
  nextPeriodStart,
  onboardedAccounts,
  recordEvent,
  setOnboarded,
  setPayoutSent,
  setTopupCheckout,
  unsentPayouts,
  type PayoutAccountRow,
  type PayoutRow,
  type TopupRow,
} from './store.js';

/** What payouts and top-ups need: also built by `svc payouts` outside a server. */
export interface PaymentDeps {
  db: Db;
  ledger: Ledger;
  payments: PaymentProvider;
  config: Pick<Config, 'payments' | 'publicUrl'>;
  log?: Pick<Logger, 'info' | 'warn' | 'error'>;
}

const CURRENCY = 'CAD';

// --- Payout accounts ---

/** `POST /node/connect`: the organization's payout account, created at the provider once. */
export async function connectAccount(
  deps: PaymentDeps,
  orgId: string,
  input: { email: string; country: string },
): Promise<{ account: PayoutAccountRow; created: boolean }> {
  const existing = await findAccountOfOrg(deps.db, orgId);
  if (existing) return { account: existing, created: false };
  const { accountId } = await deps.payments.createAccount({ orgId, email: input.email, country: input.country });
  return insertAccount(deps.db, {
    org_id: orgId,
    provider: deps.payments.name,
    account_id: accountId,
    email: input.email,
    country: input.country,
  });
}

/** `POST /node/connect/onboarding`: a fresh onboarding link for the caller's own account (else 404). */
export async function onboardingUrl(deps: PaymentDeps, orgId: string, accountId: string): Promise<string> {
  const account = await findAccountOfOrg(deps.db, orgId);
  if (!account || account.account_id !== accountId)
    throw new ApiError('not_found', `payout account ${accountId} not found`);
  const back = `${deps.config.publicUrl}/payouts`;
  const { url } = await deps.payments.onboardingLink({ accountId, returnUrl: back, refreshUrl: back });
  return url;
}

// --- Top-ups ---

export function topupRecord(row: TopupRow) {
  return {
    topup_id: row.id,
    amount_cents: row.amount_cents,
    amount: centsToCad(row.amount_cents),
    currency: 'CAD' as const,
    status: row.status,
    checkout_url: row.checkout_url,
    provider: row.provider,
    failure_reason: row.failure_reason,
    created_at: row.created_at.toISOString(),
    completed_at: row.completed_at?.toISOString() ?? null,
    confirmed_at: row.confirmed_at?.toISOString() ?? null,
  };
}

/** `POST /billing/topups`: a pending top-up and the provider's checkout page for it. Credit comes with the provider's confirmation. */
export async function createTopup(
  deps: PaymentDeps,
  principal: { orgId: string; buyerId: string },
  amountCents: number,
): Promise<TopupRow> {
  const { topupMinCents, topupMaxCents } = deps.config.payments;
  if (!Number.isSafeInteger(amountCents) || amountCents < topupMinCents || amountCents > topupMaxCents) {
    throw new ApiError('invalid_request', `amount_cents must be an integer from ${topupMinCents} to ${topupMaxCents}`, [
      { path: '/amount_cents', message: `must be an integer from ${topupMinCents} to ${topupMaxCents}` },
    ]);
  }
  const id = newId('topup');
  await insertTopup(deps.db, {
    id,
    orgId: principal.orgId,
    provider: deps.payments.name,
    amountCents,
    currency: CURRENCY,
    createdBy: principal.buyerId,
  });
  const back = `${deps.config.publicUrl}/billing?topup=${id}`;
  const session = await deps.payments.createCheckout({
    topupId: id,
    orgId: principal.orgId,
    amountCents,
    currency: CURRENCY,
    successUrl: back,
    cancelUrl: back,
  });
  const row = await setTopupCheckout(deps.db, id, session.sessionId, session.url);
  if (!row) throw new Error(`top-up ${id} vanished`);
  return row;
}

// --- Provider events ---

export type EventOutcome = 'applied' | 'duplicate' | 'ignored';

/**
 * Applies one verified provider event, at most once (its id is recorded in the same transaction
 * as its effect): onboarding state, or a top-up's credit (exactly once, and only for the amount and
 * currency the top-up asked for).
 */
export async function applyPaymentEvent(deps: PaymentDeps, event: PaymentEvent): Promise<EventOutcome> {
  const provider = deps.payments.name;
  return deps.db.transaction(async (tx) => {
    if (!(await recordEvent(tx, provider, event.id, event.type === 'ignored' ? event.providerType : event.type)))
      return 'duplicate';
    switch (event.type) {
      case 'account.updated': {
        const orgId = await setOnboarded(tx, provider, event.accountId, event.onboarded);
        if (!orgId)
          deps.log?.warn({ account_id: event.accountId }, 'payments: account.updated for an account we do not know');
        return orgId ? 'applied' : 'ignored';
      }
      case 'checkout.completed':
        return completeTopup(deps, tx, event);
      case 'checkout.expired': {
        const topup = await findTopup(tx, event.topupId, { lock: true });
        if (!topup || topup.provider !== provider) return 'ignored';
        return (await closeTopup(tx, topup.id, {
          status: 'failed',
          reason: 'the checkout expired or the payment failed',
        }))
          ? 'applied'
          : 'ignored';
      }
      case 'ignored':
        return 'ignored';
    }
  });
}

async function completeTopup(
  deps: PaymentDeps,
  tx: Queryable,
  event: Extract<PaymentEvent, { type: 'checkout.completed' }>,
): Promise<EventOutcome> {
  const topup = await findTopup(tx, event.topupId, { lock: true });
  if (
    !topup ||
    topup.provider !== deps.payments.name ||
    (topup.provider_ref && topup.provider_ref !== event.sessionId)
  ) {
    deps.log?.warn(
      { topup_id: event.topupId, session: event.sessionId },
      'payments: checkout completed for an unknown top-up',
    );
    return 'ignored';
  }
  if (topup.status !== 'pending' || !event.paid) return 'ignored';
  if (event.amountCents !== topup.amount_cents || event.currency.toUpperCase() !== topup.currency) {
    await closeTopup(tx, topup.id, {
      status: 'failed',
      reason: `the provider confirmed ${event.amountCents} ${event.currency}, not ${topup.amount_cents} ${topup.currency}`,
    });
    deps.log?.error({ topup_id: topup.id }, 'payments: confirmed amount differs from the top-up; no credit added');
    return 'applied';
  }
  // A provider that moves no money (`local`) vouches for nothing: its checkout page is the buyer's
  // own click. That credit is promotional (spendable, never paid out, and what it pays a node earns
  // nothing payable) until an administrator confirms the payment (confirmTopup).
  const confirmed = deps.payments.movesRealMoney;
  await closeTopup(tx, topup.id, { status: 'paid', confirmed });
  await deps.ledger.within(tx).credit(topup.org_id, topup.amount_cents, {
    txType: 'topup',
    description: `top-up ${topup.id} (${deps.payments.name}${confirmed ? '' : ', promotional until confirmed'})`,
    ref: topup.id,
    freeMicro: confirmed ? 0 : topup.amount_cents * MICRO_PER_CENT,
  });
  return 'applied';
}

/** Why a top-up cannot be confirmed: unknown (404), or not a paid, unconfirmed one (409). */
function notConfirmable(topupId: string, topup: TopupRow | undefined): ApiError {
  if (!topup) return new ApiError('not_found', `top-up ${topupId} not found`);
  if (topup.confirmed_at)
    return new ApiError('conflict', `top-up ${topupId} is already confirmed (${topup.confirmed_at.toISOString()})`);
  return new ApiError(
    'conflict',
    `top-up ${topupId} is ${topup.status}: only a paid top-up can be confirmed (its buyer completes the checkout first)`,
  );
}

/**
 * `svc topups confirm`: an administrator confirms that a top-up through the `local` provider was
 * really paid. Its credit becomes paid credit, once: a `topup_confirmed` ledger row turns up to
 * its amount of the organization's promotional credit into paid credit (what is left of it; credit
 * spent before stays spent as promotional). 404 for an unknown top-up, 409 for one already
 * confirmed (every Stripe top-up is), pending or failed; then nothing changes.
 *
 * @example
 * const { topup, confirmation } = await confirmTopup({ db, ledger }, 'topup_01...');
 * // confirmation.confirmed_micro: the micro-CAD that became paid credit
 */
export async function confirmTopup(
  deps: Pick<PaymentDeps, 'db' | 'ledger'>,
  topupId: string,
): Promise<{ topup: TopupRow; confirmation: Confirmation }> {
  return deps.db.transaction(async (tx) => {
    const topup = await confirmTopupRow(tx, topupId);
    if (!topup) throw notConfirmable(topupId, await findTopup(tx, topupId));
    const confirmation = await deps.ledger.within(tx).confirmCredit(topup.org_id, topup.amount_cents, {
      txType: 'topup_confirmed',
      description: `top-up ${topup.id} confirmed by an administrator: paid credit`,
      ref: topup.id,
    });
    return { topup, confirmation };
  });
}

// --- Payout runs ---

export function payoutRecord(row: PayoutRow) {
  return {
    id: row.id,
    amount_cents: row.amount_cents,
    amount: centsToCad(row.amount_cents),
    currency: 'CAD' as const,
    status: row.status,
    period_start: row.period_start.toISOString(),
    period_end: row.period_end.toISOString(),
    provider: row.provider,
    provider_ref: row.provider_ref,
    failure_reason: row.failure_reason,
    created_at: row.created_at.toISOString(),
  };
}

export interface PayoutRunReport {
  /** Payouts created by this run. */
  created: PayoutRow[];
  /** Earlier payouts whose transfer this run sent again (after a crash or an unanswered call). */
  resent: PayoutRow[];
  /** Organizations whose payable earnings were under the minimum. */
  below_minimum: number;
}

/** The idempotency key of a payout's transfer: the same on every retry, so it is paid once. */
export function payoutIdempotencyKey(payoutId: string): string {
  return `svc-payout-${payoutId}`;
}

/** True for an error after which the transfer may or may not have happened (retry with the same key). */
function outcomeUnknown(err: unknown): boolean {
  const type = (err as { type?: string } | null)?.type;
  const status = (err as { statusCode?: number } | null)?.statusCode;
  return (
    type === 'StripeConnectionError' ||
    type === 'StripeAPIError' ||
    type === 'StripeRateLimitError' ||
    status === undefined ||
    status >= 500 ||
    status === 409 ||
    status === 429
  );
}

/**
 * Sends a pending payout's transfer. On a definite refusal the payout fails with the reason and
 * its amount is credited back (`payout_reversal`), so the earnings stay payable; when the outcome
 * is unknown it stays pending and the next run sends it again with the same idempotency key.
 */
async function sendPayout(deps: PaymentDeps, payout: PayoutRow): Promise<PayoutRow> {
  try {
    const sent = await deps.payments.transfer({
      payoutId: payout.id,
      accountId: payout.account_id,
      amountCents: payout.amount_cents,
      currency: payout.currency,
      idempotencyKey: payoutIdempotencyKey(payout.id),
    });
    return (await setPayoutSent(deps.db, payout.id, sent.ref, sent.status === 'paid')) ?? payout;
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    if (outcomeUnknown(err)) {
      deps.log?.warn(
        { payout_id: payout.id, err: reason },
        'payouts: transfer outcome unknown; will retry with the same idempotency key',
      );
      return payout;
    }
    deps.log?.error({ payout_id: payout.id, err: reason }, 'payouts: transfer refused');
    return deps.db.transaction(async (tx) => {
      const failed = await failPayout(tx, payout.id, reason.slice(0, 500));
      if (!failed) return payout;
      await deps.ledger.within(tx).credit(payout.org_id, payout.amount_cents, {
        txType: 'payout_reversal',
        description: `payout ${payout.id} failed: ${reason.slice(0, 200)}`,
        ref: payout.id,
      });
      return failed;
    });
  }
}

/**
 * Debits the organization's payable earnings into a pending payout, if they reach the minimum.
 * The decision runs under a per-organization lock, so two instances never pay the same cents.
 */
async function openPayout(deps: PaymentDeps, account: PayoutAccountRow, now: Date): Promise<PayoutRow | undefined> {
  return deps.db.transaction(async (tx) => {
    await lockOrgPayouts(tx, account.org_id);
    const id = newId('po');
    // Paid credit only: a payout never takes the promotional part (the free-tier grant, earnings
    // from free-tier work, unconfirmed local top-ups), decided under the account lock.
    const debited = await deps.ledger.within(tx).payOut(account.org_id, {
      minimumCents: deps.config.payments.payoutMinimumCents,
      description: `payout ${id} to ${account.account_id}`,
      ref: id,
    });
    if (!debited) return undefined;
    return insertPayout(tx, {
      id,
      org_id: account.org_id,
      account_id: account.account_id,
      provider: account.provider,
      amount_cents: debited.cents,
      currency: CURRENCY,
      period_start: await nextPeriodStart(tx, account.org_id, now),
      period_end: now,
    });
  });
}

/**
 * One payout run (`SVC_PAYOUT_INTERVAL`, or `svc payouts run`): first sends again any payout left
 * unsent by a crash, then pays each onboarded organization its payable earnings when they reach
 * `SVC_PAYOUT_MINIMUM_CENTS`. Safe to run on several instances at once and to interrupt anywhere.
 *
 * @example
 * const report = await runPayouts(deps); // report.created: the payouts made now
 */
export async function runPayouts(deps: PaymentDeps, now = new Date()): Promise<PayoutRunReport> {
  const report: PayoutRunReport = { created: [], resent: [], below_minimum: 0 };
  for (const payout of await unsentPayouts(deps.db, deps.payments.name))
    report.resent.push(await sendPayout(deps, payout));
  for (const account of await onboardedAccounts(deps.db, deps.payments.name)) {
    const payout = await openPayout(deps, account, now);
    if (!payout) {
      report.below_minimum += 1;
      continue;
    }
    report.created.push(await sendPayout(deps, payout));
  }
  if (report.created.length || report.resent.length) {
    deps.log?.info({ created: report.created.length, resent: report.resent.length }, 'payouts: run finished');
  }
  return report;
}

/** `svc payouts mark-paid`: records that a pending payout was paid by hand (the local provider). */
export async function markPayoutPaid(deps: Pick<PaymentDeps, 'db'>, payoutId: string, ref: string): Promise<PayoutRow> {
  const payout = await setPayoutSent(deps.db, payoutId, ref, true);
  if (payout) return payout;
  throw new ApiError('conflict', `payout ${payoutId} is not pending (unknown id, or already paid or failed)`);
}

/**
 * Runs payouts every `SVC_PAYOUT_INTERVAL`, and once shortly after start for payouts a crash left
 * unsent. Returns the function that stops it.
 */
export function startPayoutSchedule(deps: PaymentDeps): () => Promise<void> {
  const interval = deps.config.payments.payoutIntervalMs;
  if (interval === 0) return async () => undefined;
  let running: Promise<unknown> = Promise.resolve();
  let stopped = false;
  const tick = (resendOnly: boolean) => {
    if (stopped) return;
    running = (async () => {
      if (resendOnly)
        for (const payout of await unsentPayouts(deps.db, deps.payments.name)) await sendPayout(deps, payout);
      else await runPayouts(deps);
    })().catch((err: unknown) => deps.log?.error({ err }, 'payouts: run failed; retrying at the next interval'));
  };
  const first = setTimeout(() => tick(true), 1_000);
  const timer = setInterval(() => tick(false), interval);
  first.unref();
  timer.unref();
  return async () => {
    stopped = true;
    clearTimeout(first);
    clearInterval(timer);
    await running;
  };
}

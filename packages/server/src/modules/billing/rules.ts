import { MICRO_PER_CENT, splitMicro } from '@svc/protocol';
import { ApiError } from '../../platform/errors.js';

/**
 * The ledger's arithmetic (DESIGN.md section 7), as pure functions: no IO, no clock.
 * The ledger posts whole cents; usage arrives in micro-CAD; the sub-cent remainder is carried on
 * the account (`0 <= carry_micro < 10_000`) and added to the next charge.
 */

/** What one usage posts: whole cents, the account's new carry, and whether a cap cut it short. */
export interface Posting {
  cents: number;
  carryMicro: number;
  capped: boolean;
}

/**
 * The whole cents that `usageMicro` costs an account carrying `carryMicro`, and the new carry.
 * With `capCents` (a hold's amount) the charge never exceeds the cap; when the cap bites the
 * carry is reset to 0, since the cap is the budget and usage beyond it is not owed.
 *
 * @example
 * applyUsage(3_333, 6_666); // { cents: 0, carryMicro: 9_999, capped: false }
 * applyUsage(3_333, 9_999); // { cents: 1, carryMicro: 3_332, capped: false }
 * applyUsage(1_234_567, 0, 100); // { cents: 100, carryMicro: 0, capped: true }
 */
export function applyUsage(usageMicro: number, carryMicro: number, capCents?: number): Posting {
  const { cents, remainder_micro } = splitMicro(usageMicro + carryMicro);
  if (capCents !== undefined && cents > capCents) return { cents: capCents, carryMicro: 0, capped: true };
  return { cents, carryMicro: remainder_micro, capped: false };
}

/**
 * What refunding a charge of `usageMicro` posts on an account carrying `carryMicro`: the mirror of
 * {@link applyUsage}. The whole cents and the new carry put the account's exact credit (balance
 * less the carried usage) back up by `usageMicro`: right after the charge, exactly where the
 * charge found it, balance and carry both.
 *
 * @example
 * applyUsage(3_333, 9_999);  // { cents: 1, carryMicro: 3_332, capped: false }
 * applyRefund(3_333, 3_332); // { cents: 1, carryMicro: 9_999 }
 * applyRefund(3_333, 9_999); // { cents: 0, carryMicro: 6_666 }
 */
export function applyRefund(usageMicro: number, carryMicro: number): { cents: number; carryMicro: number } {
  const cents = Math.max(0, Math.ceil((usageMicro - carryMicro) / MICRO_PER_CENT));
  return { cents, carryMicro: cents * MICRO_PER_CENT + carryMicro - usageMicro };
}

/**
 * An earning (`cents` credited, `freeMicro` of it promotional) taken back from the operator's
 * account in full: its cents out of the balance as far as the account has them available
 * ({@link availableCents}), the promotional part out of the promotional balance first, and the
 * rest (`owedCents`: spent or paid out) added to the account's debt, which its next credits pay
 * first ({@link debtRepayment}). The reversal's row also takes the whole earning out of the
 * payable earnings, so what was paid out of it is withheld from the next payouts.
 *
 * @example
 * const account = { balance_cents: 508, held_cents: 0, carry_micro: 0, promo_micro: 5_000_000, debt_cents: 0 };
 * earningReversal(account, { cents: 8, freeMicro: 0 });
 * // { cents: 8, owedCents: 0, account: { balance_cents: 500, ..., debt_cents: 0 } }
 * earningReversal({ ...account, balance_cents: 5, promo_micro: 0 }, { cents: 8, freeMicro: 0 });
 * // { cents: 5, owedCents: 3, account: { balance_cents: 0, ..., debt_cents: 3 } }
 */
export function earningReversal<A extends AccountFigures>(
  account: A,
  earning: { cents: number; freeMicro: number },
): { cents: number; owedCents: number; account: A } {
  const cents = Math.min(earning.cents, availableCents(account));
  const owedCents = earning.cents - cents;
  const next = { ...account, balance_cents: account.balance_cents - cents };
  return {
    cents,
    owedCents,
    account: {
      ...next,
      promo_micro: clampPromo(account.promo_micro - earning.freeMicro, next),
      debt_cents: (account.debt_cents ?? 0) + owedCents,
    },
  };
}

/**
 * What the account's debt takes of its balance now: as much of the debt as the balance has
 * free (less holds and reservations), paid credit first and promotional credit last (as a
 * payout, the promotional part stays while the paid part covers it). Called whenever credit
 * arrives (an earning, a top-up, a grant, a refund), so the debt is paid first from it.
 *
 * @example
 * const account = { balance_cents: 300, held_cents: 100, carry_micro: 0, promo_micro: 0, debt_cents: 350 };
 * debtRepayment(account); // { cents: 200, account: { balance_cents: 100, held_cents: 100, ..., debt_cents: 150 } }
 * debtRepayment({ ...account, debt_cents: 0 }); // { cents: 0, account } (unchanged)
 */
export function debtRepayment<A extends AccountFigures>(account: A): { cents: number; account: A } {
  const cents = Math.min(account.debt_cents ?? 0, freeCents(account));
  if (cents === 0) return { cents, account };
  const next = {
    ...account,
    balance_cents: account.balance_cents - cents,
    debt_cents: (account.debt_cents ?? 0) - cents,
  };
  return { cents, account: { ...next, promo_micro: clampPromo(account.promo_micro, next) } };
}

/**
 * Balance minus holds and instances' reservations, never below zero (the schema keeps
 * `held + reserved <= balance`; this is the guard): the cents on the balance nothing set aside.
 */
export function freeCents(account: { balance_cents: number; held_cents: number; reserved_cents?: number }): number {
  return Math.max(0, account.balance_cents - account.held_cents - (account.reserved_cents ?? 0));
}

/**
 * What a hold may take that no instance set aside: the free cents ({@link freeCents}) less the
 * organization's debt, never below zero. A debt is not spendable credit: a job or a request that
 * would draw on it is refused 402 as on an empty balance.
 */
export function availableCents(account: {
  balance_cents: number;
  held_cents: number;
  reserved_cents?: number;
  debt_cents?: number;
}): number {
  return Math.max(0, freeCents(account) - (account.debt_cents ?? 0));
}

/** The 402 every refusal carries, saying what is available against what is needed. */
export function insufficientCredits(available: number, needed: number): ApiError {
  return new ApiError(
    'insufficient_credits',
    `insufficient credits: ${available} cents available, ${needed} cents needed; top up or lower the budget`,
  );
}

/**
 * Throws `invalid_request` unless `value` is a safe integer from `min` (default 0) to `max`.
 *
 * @example
 * requireAmount(250, 'cents', { min: 1 }); // ok
 * requireAmount(2.5, 'cents');             // throws: cents must be an integer from 0 to ..., got 2.5
 */
export function requireAmount(
  value: number,
  name: string,
  { min = 0, max = Number.MAX_SAFE_INTEGER }: { min?: number; max?: number } = {},
): void {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min || value > max) {
    throw new ApiError('invalid_request', `${name} must be an integer from ${min} to ${max}, got ${String(value)}`, [
      { path: `/${name}`, message: `must be an integer from ${min} to ${max}` },
    ]);
  }
}

const TX_TYPE = /^[a-z][a-z0-9_]{0,31}$/;

/** Throws `invalid_request` unless `txType` is a short snake_case word (`charge`, `topup`, ...). */
export function requireTxType(txType: string): void {
  if (typeof txType !== 'string' || !TX_TYPE.test(txType)) {
    throw new ApiError('invalid_request', `tx_type must match ${TX_TYPE.source}, got '${String(txType)}'`, [
      { path: '/tx_type', message: 'must be a lower-case snake_case word of at most 32 characters' },
    ]);
  }
}

/** The largest usage one call accepts: `usage + carry` stays a safe integer. */
export const MAX_USAGE_MICRO = Number.MAX_SAFE_INTEGER - MICRO_PER_CENT;

/** The platform's fee on every charge (DESIGN.md section 7): 15 %, in basis points. */
export const PLATFORM_FEE_BPS = 1500;

/**
 * The part of a charge of `chargeMicro` paid with promotional credit: free-tier credit is spent
 * first, so it is all of the charge while `promoMicro` lasts (docs/billing.md, "Where free-tier
 * credit can go").
 *
 * @example
 * freePart(1_800, 5_000_000); // 1_800: paid entirely with free-tier credit
 * freePart(1_800, 800);       // 800: the rest is paid credit
 */
export function freePart(chargeMicro: number, promoMicro: number): number {
  return Math.max(0, Math.min(chargeMicro, promoMicro));
}

/**
 * The promotional balance after a change, never above what the account exactly holds (its cents
 * less the carried usage it owes), never below zero.
 */
export function clampPromo(promoMicro: number, account: { balance_cents: number; carry_micro: number }): number {
  return Math.max(0, Math.min(promoMicro, account.balance_cents * MICRO_PER_CENT - account.carry_micro));
}

/** What an operator earns on one charge: the charge less the platform fee, split payable / not. */
export interface Earning {
  /** Exact earning in micro-CAD. */
  micro: number;
  /** The part earned from free-tier credit: promotional, never payable. */
  freeMicro: number;
  /** `micro - freeMicro`: what payouts may pay. */
  payableMicro: number;
  /** Whole cents credited to the operator's balance (the fee taken from the whole cents charged). */
  cents: number;
}

/**
 * The operator's earning on a charge of `micro` (of which `freeMicro` was paid with free-tier
 * credit) that moved `cents` from the buyer: 85 % of each, rounded down.
 *
 * @example
 * operatorEarning({ micro: 1_800, freeMicro: 1_800, cents: 0 });
 * // { micro: 1_530, freeMicro: 1_530, payableMicro: 0, cents: 0 }
 * operatorEarning({ micro: 5_000_000, freeMicro: 0, cents: 500 });
 * // { micro: 4_250_000, freeMicro: 0, payableMicro: 4_250_000, cents: 425 }
 */
export function operatorEarning(
  charge: { micro: number; freeMicro: number; cents: number },
  feeBps = PLATFORM_FEE_BPS,
): Earning {
  const net = (x: number) => Math.floor((x * (10_000 - feeBps)) / 10_000);
  const micro = net(charge.micro);
  const freeMicro = Math.min(micro, net(charge.freeMicro));
  return { micro, freeMicro, payableMicro: micro - freeMicro, cents: net(charge.cents) };
}

/** The figures of an account the payout rules read (a row of `credit_accounts`). */
export interface AccountFigures {
  balance_cents: number;
  held_cents: number;
  carry_micro: number;
  promo_micro: number;
  reserved_cents?: number;
  /** What the organization owes (a reversed earning its balance no longer held): never spendable, never paid out. */
  debt_cents?: number;
}

/**
 * The paid (non-promotional) credit an account can move now, in whole cents: its exact credit
 * less the carried usage it owes and its promotional part, in whole cents, less its holds,
 * reservations and debt; never below zero. Promotional credit buys compute and never leaves as
 * money, and a debt is paid before anything is paid out, so this is the most a payout may take.
 *
 * @example
 * // The sign-up grant (500) and free-tier earnings (850) are promotional; 1,000 cents were earned in cash.
 * cashCents({ balance_cents: 2_350, held_cents: 0, carry_micro: 0, promo_micro: 13_500_000 }); // 1_000
 * cashCents({ balance_cents: 2_350, held_cents: 0, carry_micro: 1, promo_micro: 13_500_000 }); // 999
 * cashCents({ balance_cents: 2_350, held_cents: 0, carry_micro: 0, promo_micro: 13_500_000, debt_cents: 300 }); // 700
 */
export function cashCents(account: AccountFigures): number {
  const cashMicro = account.balance_cents * MICRO_PER_CENT - account.carry_micro - account.promo_micro;
  const setAside = account.held_cents + (account.reserved_cents ?? 0) + (account.debt_cents ?? 0);
  return Math.max(0, Math.floor(cashMicro / MICRO_PER_CENT) - setAside);
}

/**
 * A payout of `cents` posted on the account: the cents leave its paid part only, so the
 * promotional part is exactly what it was (a `charge` would spend it first, and the grant and the
 * free-tier earnings would leave as money while the paid credit stayed to be paid out again).
 * Throws 409 `conflict` when the paid credit is short.
 *
 * @example
 * const account = { balance_cents: 2_350, held_cents: 0, carry_micro: 0, promo_micro: 13_500_000 };
 * payoutPosting(account, 1_000); // { balance_cents: 1_350, held_cents: 0, carry_micro: 0, promo_micro: 13_500_000 }
 * payoutPosting(account, 1_001); // throws: a payout of 1001 cents exceeds the 1000 cents of paid credit available
 */
export function payoutPosting<A extends AccountFigures>(account: A, cents: number): A {
  const cash = cashCents(account);
  if (cents > cash)
    throw new ApiError('conflict', `a payout of ${cents} cents exceeds the ${cash} cents of paid credit available`);
  return { ...account, balance_cents: account.balance_cents - cents };
}

/**
 * An administrator's confirmation that `cents` of credit the payment provider could not vouch for
 * (a top-up through the offline `local` provider) were paid: up to that much of the promotional
 * part becomes paid credit. Only what is left of it: credit already spent was spent as
 * promotional credit, and the earnings it paid stay non-payable.
 *
 * @example
 * confirmPosting(15_000_000, 1_000); // { promoMicro: 5_000_000, confirmedMicro: 10_000_000 }
 * confirmPosting(4_000_000, 1_000);  // { promoMicro: 0, confirmedMicro: 4_000_000 }
 */
export function confirmPosting(promoMicro: number, cents: number): { promoMicro: number; confirmedMicro: number } {
  const confirmedMicro = freePart(cents * MICRO_PER_CENT, promoMicro);
  return { promoMicro: promoMicro - confirmedMicro, confirmedMicro };
}

/**
 * What payouts may pay an operator organization now: its payable earnings (whole cents) less what
 * was paid out already, never more than the paid (non-promotional) credit it has available
 * ({@link cashCents}).
 *
 * @example
 * payableCents({ payableEarnedMicro: 4_259_999, paidOutCents: 0, cashCents: 1_000 }); // 425
 * payableCents({ payableEarnedMicro: 4_250_000, paidOutCents: 0, cashCents: 0 }); // 0
 */
export function payableCents(figures: { payableEarnedMicro: number; paidOutCents: number; cashCents: number }): number {
  const earned = Math.floor(figures.payableEarnedMicro / MICRO_PER_CENT) - figures.paidOutCents;
  return Math.max(0, Math.min(earned, figures.cashCents));
}

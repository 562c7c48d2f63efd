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

/** Balance minus holds, never below zero (the schema keeps `held <= balance`; this is the guard). */
export function availableCents(account: { balance_cents: number; held_cents: number }): number {
  return Math.max(0, account.balance_cents - account.held_cents);
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
export function requireAmount(value: number, name: string, { min = 0, max = Number.MAX_SAFE_INTEGER }: { min?: number; max?: number } = {}): void {
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

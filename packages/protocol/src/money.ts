import { ProtocolError } from './errors.js';

/** 1 CAD in micro-CAD, the internal unit of every amount. */
export const MICRO_PER_CAD = 1_000_000;
/** 1 cent in micro-CAD. */
export const MICRO_PER_CENT = 10_000;

/** How {@link microToCents} rounds a sub-cent remainder. */
export type CentRounding = 'up' | 'down' | 'nearest';

function requireSafeInteger(value: number, path: string): void {
  if (!Number.isSafeInteger(value)) throw new ProtocolError(`${path.slice(1)} must be an integer`, path);
}

/**
 * Whole cents and the sub-cent remainder in micro-CAD, rounding toward negative infinity, so
 * `cents * 10_000 + remainder_micro === micro` and `0 <= remainder_micro < 10_000`. This is the
 * ledger rule: post `cents`, carry `remainder_micro` to the account's next charge.
 *
 * @example
 * splitMicro(1_234_567); // { cents: 123, remainder_micro: 4_567 }
 */
export function splitMicro(micro: number): { cents: number; remainder_micro: number } {
  requireSafeInteger(micro, '/micro');
  const remainder = ((micro % MICRO_PER_CENT) + MICRO_PER_CENT) % MICRO_PER_CENT;
  return { cents: (micro - remainder) / MICRO_PER_CENT, remainder_micro: remainder };
}

/**
 * Integer cents from micro-CAD. The default, `'up'` (toward positive infinity), is for
 * estimates and holds: a hold in cents always covers the exact cost. `'down'` is the ledger's
 * whole-cent part (see {@link splitMicro}); `'nearest'` rounds half away from zero, for display.
 *
 * @example
 * microToCents(1_234_567); // 124
 * microToCents(1_234_567, 'down'); // 123
 * microToCents(1_235_000, 'nearest'); // 124
 */
export function microToCents(micro: number, rounding: CentRounding = 'up'): number {
  const { cents, remainder_micro } = splitMicro(micro);
  if (remainder_micro === 0 || rounding === 'down') return cents;
  if (rounding === 'up') return cents + 1;
  // Half away from zero: a positive half rounds up, a negative half stays at the lower cent.
  const roundUp = micro > 0 ? remainder_micro >= MICRO_PER_CENT / 2 : remainder_micro > MICRO_PER_CENT / 2;
  return roundUp ? cents + 1 : cents;
}

/**
 * CAD as a number from integer cents (the `*_cents` field's twin without `_cents`).
 *
 * @example
 * centsToCad(1_250); // 12.5
 */
export function centsToCad(cents: number): number {
  requireSafeInteger(cents, '/cents');
  return cents / 100;
}

/**
 * CAD as a number from integer micro-CAD (for prices below a cent).
 *
 * @example
 * microToCad(100); // 0.0001 (one audio second)
 */
export function microToCad(micro: number): number {
  requireSafeInteger(micro, '/micro');
  return micro / MICRO_PER_CAD;
}

/**
 * Integer micro-CAD from a CAD number (such as a request's `max_price_per_unit`), rounded to
 * the nearest micro-CAD.
 *
 * @example
 * cadToMicro(0.03); // 30_000
 */
export function cadToMicro(cad: number): number {
  const micro = Math.round(cad * MICRO_PER_CAD);
  if (!Number.isFinite(cad) || !Number.isSafeInteger(micro)) {
    throw new ProtocolError('amount must be a finite number of CAD', '/cad');
  }
  return Object.is(micro, -0) ? 0 : micro;
}

import type { RateDecision, RateRule } from './interface.js';

/** A bucket as stored between takes: its (fractional) tokens at `updatedMs`. */
export interface BucketState {
  tokens: number;
  updatedMs: number;
}

/**
 * Slack for floating-point refill: 10 s at 0.1 tokens/s must give one whole token, not
 * 0.9999999999999999. Far below anything a real rule can tell apart.
 */
export const TOKEN_EPSILON = 1e-9;

/**
 * Throws RangeError unless the rule and cost describe a bucket that can ever refill.
 *
 * @example
 * assertRule({ ratePerSec: 0, burst: 5 }, 1); // RangeError: ratePerSec must be a positive number, got 0
 */
export function assertRule(rule: RateRule, cost: number): void {
  if (!(Number.isFinite(rule.ratePerSec) && rule.ratePerSec > 0))
    throw new RangeError(`ratePerSec must be a positive number, got ${rule.ratePerSec}`);
  if (!(Number.isFinite(rule.burst) && rule.burst > 0))
    throw new RangeError(`burst must be a positive number, got ${rule.burst}`);
  if (!(Number.isFinite(cost) && cost >= 0)) throw new RangeError(`cost must be a number >= 0, got ${cost}`);
}

/**
 * The decision for a bucket left with `tokens` after a take that was (or was not) `allowed`.
 * Shared by the in-process and the Redis limiter, so both answer alike.
 *
 * @example
 * decide({ ratePerSec: 1, burst: 10 }, 1, true, 9); // { allowed: true, limit: 10, remaining: 9, resetSeconds: 1, retryAfterSeconds: 0 }
 */
export function decide(rule: RateRule, cost: number, allowed: boolean, tokens: number): RateDecision {
  const secondsUntil = (target: number): number =>
    Math.max(0, Math.ceil((target - tokens - TOKEN_EPSILON) / rule.ratePerSec));
  const resetSeconds = secondsUntil(rule.burst);
  let retryAfterSeconds = 0;
  if (!allowed) retryAfterSeconds = Math.max(1, cost > rule.burst ? resetSeconds : secondsUntil(cost));
  return {
    allowed,
    limit: rule.burst,
    remaining: Math.max(0, Math.floor(tokens + TOKEN_EPSILON)),
    resetSeconds,
    retryAfterSeconds,
  };
}

/**
 * The token-bucket rule as a pure function. `state` undefined is a full bucket. Refill is
 * continuous and capped at `burst`; a take succeeds only if all `cost` tokens are there.
 * A clock that went backwards counts as no elapsed time, and the bucket is re-anchored at the
 * new `nowMs` so that it keeps refilling instead of waiting for the old clock to come back.
 *
 * @example
 * const rule = { ratePerSec: 1, burst: 2 };
 * let r = takeTokens(undefined, rule, 1, 0);   // allowed, remaining 1
 * r = takeTokens(r.state, rule, 2, 500);       // denied: 1.5 tokens, retryAfterSeconds 1
 */
export function takeTokens(
  state: BucketState | undefined,
  rule: RateRule,
  cost: number,
  nowMs: number,
): { state: BucketState; decision: RateDecision } {
  assertRule(rule, cost);
  let tokens = rule.burst;
  if (state !== undefined) {
    const elapsedMs = Math.max(0, nowMs - state.updatedMs);
    tokens = Math.min(rule.burst, state.tokens + (elapsedMs * rule.ratePerSec) / 1000);
  }
  const allowed = tokens + TOKEN_EPSILON >= cost;
  if (allowed) tokens = Math.max(0, tokens - cost);
  return { state: { tokens, updatedMs: nowMs }, decision: decide(rule, cost, allowed, tokens) };
}

/**
 * Whether a bucket holding `tokens` is full, i.e. no different from a bucket never seen.
 *
 * @example
 * isFull({ ratePerSec: 1, burst: 3 }, 2.9999999999); // true
 */
export function isFull(rule: RateRule, tokens: number): boolean {
  return tokens + TOKEN_EPSILON >= rule.burst;
}

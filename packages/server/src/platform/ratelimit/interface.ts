/**
 * A token bucket: it holds at most `burst` tokens and refills continuously at `ratePerSec` tokens
 * per second. A request takes `cost` tokens (1 unless said otherwise).
 */
export interface RateRule {
  ratePerSec: number;
  burst: number;
}

/** What one `take` decided, with everything a caller needs for `RateLimit-*` / `Retry-After` headers. */
export interface RateDecision {
  allowed: boolean;
  /** The bucket's capacity (`burst`). A denied take whose cost exceeds it can never succeed. */
  limit: number;
  /** Whole tokens left after this take, >= 0. */
  remaining: number;
  /** Whole seconds (rounded up) until the bucket is full again; 0 when it is full. */
  resetSeconds: number;
  /**
   * 0 when allowed; otherwise whole seconds (rounded up, >= 1) until `cost` tokens are there.
   * When `cost > limit` that moment never comes, and this is the time until the bucket is full.
   */
  retryAfterSeconds: number;
}

/**
 * Counts requests per key against a rule: in this process (`memory`) or shared by every
 * instance through Redis (`redis`).
 */
export interface RateLimiter {
  readonly kind: 'memory' | 'redis';
  /** Takes `cost` tokens (default 1) from `key`'s bucket if they are there; never partially. */
  take(key: string, rule: RateRule, cost?: number): Promise<RateDecision>;
  close(): Promise<void>;
}

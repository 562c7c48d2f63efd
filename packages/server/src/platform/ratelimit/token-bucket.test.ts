import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { RateRule } from './interface.js';
import { takeTokens, type BucketState } from './token-bucket.js';

/** Runs takes of `costs` at `atMs` in order from a fresh bucket, returning every result. */
function run(rule: RateRule, steps: Array<{ atMs: number; cost?: number }>) {
  let state: BucketState | undefined;
  return steps.map(({ atMs, cost = 1 }) => {
    const result = takeTokens(state, rule, cost, atMs);
    state = result.state;
    return result;
  });
}

describe('takeTokens', () => {
  it('starts full, allows a burst, then denies with the wait for one token', () => {
    const rule = { ratePerSec: 1, burst: 3 };
    const results = run(rule, [{ atMs: 0 }, { atMs: 0 }, { atMs: 0 }, { atMs: 0 }]);
    expect(results.map((r) => r.decision)).toEqual([
      { allowed: true, limit: 3, remaining: 2, resetSeconds: 1, retryAfterSeconds: 0 },
      { allowed: true, limit: 3, remaining: 1, resetSeconds: 2, retryAfterSeconds: 0 },
      { allowed: true, limit: 3, remaining: 0, resetSeconds: 3, retryAfterSeconds: 0 },
      { allowed: false, limit: 3, remaining: 0, resetSeconds: 3, retryAfterSeconds: 1 },
    ]);
    expect(results[3]?.state).toEqual({ tokens: 0, updatedMs: 0 });
  });

  it('refills one token per 1/ratePerSec seconds after a burst', () => {
    const rule = { ratePerSec: 2, burst: 2 };
    const results = run(rule, [
      { atMs: 0 },
      { atMs: 0 },
      { atMs: 400 },
      { atMs: 500 },
      { atMs: 500 },
      { atMs: 1500 },
      { atMs: 1500 },
      { atMs: 1500 },
    ]);
    expect(results.map((r) => r.decision.allowed)).toEqual([true, true, false, true, false, true, true, false]);
    expect(results[2]?.state.tokens).toBeCloseTo(0.8, 12);
  });

  it('keeps fractional refill between takes and rounds waits up', () => {
    const rule = { ratePerSec: 2, burst: 5 };
    const [, , second] = run(rule, [{ atMs: 0, cost: 5 }, { atMs: 250 }, { atMs: 500 }]);
    const denied = run(rule, [{ atMs: 0, cost: 5 }, { atMs: 250 }])[1];
    expect(denied?.state.tokens).toBe(0.5);
    expect(denied?.decision).toEqual({ allowed: false, limit: 5, remaining: 0, resetSeconds: 3, retryAfterSeconds: 1 });
    expect(second?.decision).toMatchObject({ allowed: true, remaining: 0, resetSeconds: 3 });
    expect(second?.state.tokens).toBe(0);
  });

  it('gives a whole token after exactly 1/ratePerSec despite floating point (0.1/s for 10 s)', () => {
    const rule = { ratePerSec: 0.1, burst: 1 };
    const results = run(rule, [{ atMs: 0 }, { atMs: 9_999 }, { atMs: 10_000 }]);
    expect(results.map((r) => r.decision.allowed)).toEqual([true, false, true]);
    expect(results[1]?.decision.retryAfterSeconds).toBe(1);
  });

  it('computes retryAfter for slow rates and costs above one', () => {
    const slow = run({ ratePerSec: 0.1, burst: 2 }, [{ atMs: 0, cost: 2 }, { atMs: 0 }])[1];
    expect(slow?.decision).toMatchObject({ allowed: false, retryAfterSeconds: 10, resetSeconds: 20 });
    const heavy = run({ ratePerSec: 1, burst: 4 }, [
      { atMs: 0, cost: 4 },
      { atMs: 500, cost: 3 },
    ])[1];
    expect(heavy?.decision).toMatchObject({ allowed: false, remaining: 0, retryAfterSeconds: 3, resetSeconds: 4 });
  });

  it('never fills above burst, however long the bucket sat', () => {
    const rule = { ratePerSec: 100, burst: 3 };
    const results = run(rule, [{ atMs: 0, cost: 3 }, { atMs: 10_000_000 }]);
    expect(results[1]?.decision).toMatchObject({ allowed: true, remaining: 2 });
    expect(results[1]?.state.tokens).toBe(2);
  });

  it('never allows a cost above burst, says so through limit < cost, and asks to wait until full', () => {
    const rule = { ratePerSec: 1, burst: 10 };
    const fromFull = takeTokens(undefined, rule, 11, 0);
    expect(fromFull.decision).toEqual({
      allowed: false,
      limit: 10,
      remaining: 10,
      resetSeconds: 0,
      retryAfterSeconds: 1,
    });
    const afterWait = takeTokens(fromFull.state, rule, 11, 3_600_000);
    expect(afterWait.decision.allowed).toBe(false);
    const drained = takeTokens({ tokens: 4, updatedMs: 0 }, rule, 11, 0);
    expect(drained.decision).toMatchObject({ allowed: false, remaining: 4, resetSeconds: 6, retryAfterSeconds: 6 });
    expect(drained.state.tokens).toBe(4);
  });

  it('treats a clock that went backwards as no elapsed time and refills from the new clock', () => {
    const rule = { ratePerSec: 1, burst: 5 };
    const back = takeTokens({ tokens: 0, updatedMs: 10_000 }, rule, 1, 4_000);
    expect(back.decision).toMatchObject({ allowed: false, remaining: 0, retryAfterSeconds: 1 });
    expect(back.state).toEqual({ tokens: 0, updatedMs: 4_000 });
    expect(takeTokens(back.state, rule, 1, 5_000).decision).toMatchObject({ allowed: true, remaining: 0 });
  });

  it('lets cost 0 peek without taking anything', () => {
    const rule = { ratePerSec: 1, burst: 2 };
    const peek = takeTokens({ tokens: 0.5, updatedMs: 0 }, rule, 0, 0);
    expect(peek.decision).toEqual({ allowed: true, limit: 2, remaining: 0, resetSeconds: 2, retryAfterSeconds: 0 });
    expect(peek.state.tokens).toBe(0.5);
  });

  it('rejects rules that could never refill and nonsensical costs', () => {
    expect(() => takeTokens(undefined, { ratePerSec: 0, burst: 1 }, 1, 0)).toThrow(RangeError);
    expect(() => takeTokens(undefined, { ratePerSec: 1, burst: 0 }, 1, 0)).toThrow(/burst/);
    expect(() => takeTokens(undefined, { ratePerSec: Number.NaN, burst: 1 }, 1, 0)).toThrow(/ratePerSec/);
    expect(() => takeTokens(undefined, { ratePerSec: 1, burst: 1 }, -1, 0)).toThrow(/cost/);
    expect(() => takeTokens(undefined, { ratePerSec: 1, burst: 1 }, Number.POSITIVE_INFINITY, 0)).toThrow(/cost/);
  });
});

describe('takeTokens properties', () => {
  const ruleArb = fc.record({
    ratePerSec: fc.double({ min: 0.01, max: 1000, noNaN: true, noDefaultInfinity: true }),
    burst: fc.integer({ min: 1, max: 100 }),
  });
  const stepsArb = fc.array(
    fc.record({ dtMs: fc.integer({ min: 0, max: 5_000 }), cost: fc.integer({ min: 0, max: 120 }) }),
    { minLength: 1, maxLength: 60 },
  );

  it('keeps tokens within [0, burst] and decisions well-formed', () => {
    fc.assert(
      fc.property(ruleArb, stepsArb, (rule, steps) => {
        let state: BucketState | undefined;
        let nowMs = 0;
        for (const { dtMs, cost } of steps) {
          nowMs += dtMs;
          const r = takeTokens(state, rule, cost, nowMs);
          state = r.state;
          const d = r.decision;
          expect(state.tokens).toBeGreaterThanOrEqual(0);
          expect(state.tokens).toBeLessThanOrEqual(rule.burst);
          expect(d.limit).toBe(rule.burst);
          expect(Number.isInteger(d.remaining) && d.remaining >= 0 && d.remaining <= rule.burst).toBe(true);
          expect(Number.isInteger(d.resetSeconds) && d.resetSeconds >= 0).toBe(true);
          expect(Number.isInteger(d.retryAfterSeconds)).toBe(true);
          expect(d.retryAfterSeconds === 0).toBe(d.allowed);
          if (cost > rule.burst) expect(d.allowed).toBe(false);
        }
      }),
    );
  });

  it('never lets through more than burst + ratePerSec * elapsed, in any window', () => {
    fc.assert(
      fc.property(ruleArb, stepsArb, (rule, steps) => {
        let state: BucketState | undefined;
        let nowMs = 0;
        const allowed: Array<{ atMs: number; cost: number }> = [];
        for (const { dtMs, cost } of steps) {
          nowMs += dtMs;
          const r = takeTokens(state, rule, cost, nowMs);
          state = r.state;
          if (r.decision.allowed) allowed.push({ atMs: nowMs, cost });
        }
        for (let i = 0; i < allowed.length; i++) {
          let taken = 0;
          for (let j = i; j < allowed.length; j++) {
            taken += allowed[j]?.cost ?? 0;
            const windowMs = (allowed[j]?.atMs ?? 0) - (allowed[i]?.atMs ?? 0);
            expect(taken).toBeLessThanOrEqual(rule.burst + (rule.ratePerSec * windowMs) / 1000 + 1e-6);
          }
        }
      }),
    );
  });

  it('allows a denied take once retryAfterSeconds have passed, and not a second earlier', () => {
    fc.assert(
      fc.property(ruleArb, stepsArb, fc.integer({ min: 1, max: 100 }), (rule, steps, costRaw) => {
        let state: BucketState | undefined;
        let nowMs = 0;
        for (const { dtMs, cost } of steps) {
          nowMs += dtMs;
          state = takeTokens(state, rule, cost, nowMs).state;
        }
        const cost = Math.min(costRaw, rule.burst);
        const denied = takeTokens(state, rule, cost, nowMs);
        if (denied.decision.allowed) return;
        const wait = denied.decision.retryAfterSeconds;
        expect(takeTokens(denied.state, rule, cost, nowMs + wait * 1000).decision.allowed).toBe(true);
        if (wait > 1)
          expect(takeTokens(denied.state, rule, cost, nowMs + (wait - 1) * 1000).decision.allowed).toBe(false);
      }),
    );
  });
});

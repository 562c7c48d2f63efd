import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ApiError } from '../../platform/errors.js';
import { applyUsage, availableCents, insufficientCredits, requireAmount, requireTxType } from './rules.js';

describe('applyUsage (the carry arithmetic)', () => {
  it('posts whole cents and carries the remainder', () => {
    expect(applyUsage(1_234_567, 0)).toEqual({ cents: 123, carryMicro: 4_567, capped: false });
    expect(applyUsage(5_433, 4_567)).toEqual({ cents: 1, carryMicro: 0, capped: false });
    expect(applyUsage(0, 9_999)).toEqual({ cents: 0, carryMicro: 9_999, capped: false });
  });

  it('three charges of 3,333 µ post nothing, the fourth posts the cent the carry reached', () => {
    let carry = 0;
    const posted = [3_333, 3_333, 3_333, 3_333].map((usage) => {
      const p = applyUsage(usage, carry);
      carry = p.carryMicro;
      return p.cents;
    });
    expect(posted).toEqual([0, 0, 0, 1]);
    expect(carry).toBe(3_332);
  });

  it('caps at the hold and resets the carry when the cap bites', () => {
    expect(applyUsage(1_234_567, 5_000, 100)).toEqual({ cents: 100, carryMicro: 0, capped: true });
    // Exactly the cap plus a sub-cent remainder is not "over": the remainder is carried.
    expect(applyUsage(1_005_000, 0, 100)).toEqual({ cents: 100, carryMicro: 5_000, capped: false });
    expect(applyUsage(0, 0, 0)).toEqual({ cents: 0, carryMicro: 0, capped: false });
  });

  it('never drifts from exact usage by a cent or more (property)', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 5_000_000 }), { maxLength: 200 }), (usages) => {
        let carry = 0;
        let cents = 0;
        for (const usage of usages) {
          const p = applyUsage(usage, carry);
          expect(p.carryMicro).toBeGreaterThanOrEqual(0);
          expect(p.carryMicro).toBeLessThan(10_000);
          cents += p.cents;
          carry = p.carryMicro;
        }
        const exact = usages.reduce((a, b) => a + b, 0);
        expect(cents * 10_000 + carry).toBe(exact);
        expect(Math.abs(cents * 10_000 - exact)).toBeLessThan(10_000);
      }),
      { numRuns: 500 },
    );
  });
});

describe('guards', () => {
  it('available is balance minus holds, never negative', () => {
    expect(availableCents({ balance_cents: 500, held_cents: 120 })).toBe(380);
    expect(availableCents({ balance_cents: 5, held_cents: 9 })).toBe(0);
  });

  it('the 402 says what is available and what is needed', () => {
    const err = insufficientCredits(380, 500);
    expect(err).toBeInstanceOf(ApiError);
    expect(err.status).toBe(402);
    expect(err.code).toBe('insufficient_credits');
    expect(err.message).toBe('insufficient credits: 380 cents available, 500 cents needed; top up or lower the budget');
  });

  it('amounts must be safe integers in range', () => {
    expect(() => requireAmount(0, 'cents')).not.toThrow();
    for (const bad of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53]) {
      expect(() => requireAmount(bad, 'cents')).toThrow(/cents must be an integer from 0 to/);
    }
    expect(() => requireAmount(0, 'cents', { min: 1 })).toThrow(
      'cents must be an integer from 1 to 9007199254740991, got 0',
    );
    expect(() => requireAmount('5' as unknown as number, 'cents')).toThrow(ApiError);
  });

  it('tx_type is a short snake_case word', () => {
    for (const ok of ['charge', 'topup', 'free_tier', 'refund2']) expect(() => requireTxType(ok)).not.toThrow();
    for (const bad of ['', 'Top-up', 'a b', '9x', 'x'.repeat(33)])
      expect(() => requireTxType(bad)).toThrow(/tx_type must match/);
  });
});

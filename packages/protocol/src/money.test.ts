import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ProtocolError } from './errors.js';
import { cadToMicro, centsToCad, microToCad, microToCents, splitMicro } from './money.js';

describe('splitMicro', () => {
  it('splits into whole cents and a non-negative remainder', () => {
    expect(splitMicro(1_234_567)).toEqual({ cents: 123, remainder_micro: 4_567 });
    expect(splitMicro(-1)).toEqual({ cents: -1, remainder_micro: 9_999 });
    expect(splitMicro(0)).toEqual({ cents: 0, remainder_micro: 0 });
  });

  it('always recombines exactly', () => {
    fc.assert(
      fc.property(fc.maxSafeInteger(), (micro) => {
        const { cents, remainder_micro } = splitMicro(micro);
        expect(remainder_micro).toBeGreaterThanOrEqual(0);
        expect(remainder_micro).toBeLessThan(10_000);
        expect(BigInt(cents) * 10_000n + BigInt(remainder_micro)).toBe(BigInt(micro));
      }),
    );
  });
});

describe('microToCents', () => {
  it.each<[number, 'up' | 'down' | 'nearest' | undefined, number]>([
    [1_234_567, undefined, 124],
    [1_234_567, 'up', 124],
    [1_234_567, 'down', 123],
    [1_234_567, 'nearest', 123],
    [1_235_000, 'nearest', 124],
    [1_234_999, 'nearest', 123],
    [-15_000, 'nearest', -2],
    [-14_000, 'nearest', -1],
    [-15_000, 'up', -1],
    [-15_000, 'down', -2],
    [30_000, 'up', 3],
    [1, 'up', 1],
    [0, 'up', 0],
  ])('microToCents(%i, %s) = %i', (micro, rounding, cents) => {
    expect(microToCents(micro, rounding)).toBe(cents);
  });

  it('never holds less than the exact amount when rounding up', () => {
    fc.assert(
      fc.property(fc.nat({ max: 2 ** 50 }), (micro) => {
        const cents = microToCents(micro);
        expect(cents * 10_000).toBeGreaterThanOrEqual(micro);
        expect(cents * 10_000 - micro).toBeLessThan(10_000);
      }),
    );
  });

  it('rejects non-integers', () => {
    expect(() => microToCents(1.5)).toThrow(ProtocolError);
    expect(() => microToCents(Number.NaN)).toThrow(ProtocolError);
  });
});

describe('CAD conversions', () => {
  it('converts cents and micro-CAD to CAD numbers', () => {
    expect(centsToCad(1_250)).toBe(12.5);
    expect(centsToCad(-3)).toBe(-0.03);
    expect(microToCad(30_000)).toBe(0.03);
    expect(microToCad(100)).toBe(0.0001);
    expect(() => centsToCad(0.5)).toThrow(ProtocolError);
  });

  it('converts CAD to the nearest micro-CAD', () => {
    expect(cadToMicro(0.03)).toBe(30_000);
    expect(cadToMicro(0.006 / 60)).toBe(100);
    expect(cadToMicro(-0)).toBe(0);
    expect(() => cadToMicro(Number.POSITIVE_INFINITY)).toThrow(ProtocolError);
    expect(() => cadToMicro(1e300)).toThrow(ProtocolError);
  });
});

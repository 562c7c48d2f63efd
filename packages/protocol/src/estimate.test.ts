import { describe, expect, it } from 'vitest';
import { ProtocolError } from './errors.js';
import { estimateCost } from './estimate.js';

function pathOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    if (err instanceof ProtocolError) return err.path;
    throw err;
  }
  return 'did not throw';
}

describe('estimateCost', () => {
  it('prices audio per started second at 0.006 CAD per minute', () => {
    expect(estimateCost(3, { estimated_duration_ms: 60_000 })).toEqual({
      units: 60,
      min_micro: 6_000,
      max_micro: 6_000,
      recommended_micro: 6_600,
    });
    expect(estimateCost(3, { estimated_duration_ms: 90_500 }).units).toBe(91);
    expect(estimateCost(3, { estimated_duration_ms: 1 }).min_micro).toBe(100);
  });

  it('prices images at 0.03 CAD each', () => {
    expect(estimateCost(4, { estimated_images: 4 })).toMatchObject({
      units: 4,
      min_micro: 120_000,
      max_micro: 120_000,
    });
  });

  it('prices tokens per 1,000, rounding up to a whole micro-CAD', () => {
    expect(estimateCost(1, { estimated_tokens: 10_000 })).toEqual({
      units: 10_000,
      min_micro: 500,
      max_micro: 12_000,
      recommended_micro: 13_200,
    });
    expect(estimateCost(2, { estimated_tokens: 1 })).toMatchObject({ min_micro: 1, max_micro: 1 });
  });

  it('reads only the kind main input and defaults it when missing', () => {
    expect(estimateCost(6, { estimated_gpu_seconds: 10, estimated_tokens: 999 })).toMatchObject({
      units: 10,
      min_micro: 1_500,
      max_micro: 9_000,
    });
    expect(estimateCost(6).units).toBe(60);
    expect(estimateCost(10, {}).units).toBe(1);
    const zero = { units: 0, min_micro: 0, max_micro: 0, recommended_micro: 0 };
    expect(estimateCost(8, { estimated_scenes: 0 })).toEqual(zero);
  });

  it('recommends max + 10 %, rounded up', () => {
    const expected = { units: 3, min_micro: 30, max_micro: 90, recommended_micro: 99 };
    expect(estimateCost(5, { estimated_duration_ms: 3_000 })).toEqual(expected);
    expect(estimateCost(5, { estimated_duration_ms: 1_000 }).recommended_micro).toBe(33);
  });

  it('rejects unknown kinds and bad quantities with the field path', () => {
    expect(pathOf(() => estimateCost(0))).toBe('/kind');
    expect(pathOf(() => estimateCost(1.5))).toBe('/kind');
    expect(pathOf(() => estimateCost(1, { estimated_tokens: -1 }))).toBe('/estimated_tokens');
    expect(pathOf(() => estimateCost(1, { estimated_tokens: 2.5 }))).toBe('/estimated_tokens');
    expect(pathOf(() => estimateCost(4, { estimated_runs: -3 }))).toBe('/estimated_runs');
    expect(pathOf(() => estimateCost(8, { estimated_scenes: Number.MAX_SAFE_INTEGER }))).toBe('/estimated_scenes');
  });
});

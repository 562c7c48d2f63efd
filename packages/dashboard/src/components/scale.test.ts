import { describe, expect, it } from 'vitest';
import { labelEvery, niceTicks } from './scale';

describe('chart scales', () => {
  it('rounds the top up to a nice step and ticks evenly from zero', () => {
    expect(niceTicks(87)).toEqual({ max: 100, ticks: [0, 25, 50, 75, 100] });
    expect(niceTicks(130)).toEqual({ max: 150, ticks: [0, 50, 100, 150] });
    expect(niceTicks(3)).toEqual({ max: 3, ticks: [0, 1, 2, 3] });
    expect(niceTicks(0.3).ticks.at(-1)).toBeGreaterThanOrEqual(0.3);
  });

  it('gives an empty series a unit scale', () => {
    expect(niceTicks(0)).toEqual({ max: 1, ticks: [0, 1] });
    expect(niceTicks(Number.NaN)).toEqual({ max: 1, ticks: [0, 1] });
  });

  it('labels every n-th bar so the labels fit', () => {
    expect(labelEvery(30, 8)).toBe(4);
    expect(labelEvery(7, 8)).toBe(1);
  });
});

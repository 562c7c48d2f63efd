/** Axis arithmetic for the SVG charts. Pure: tested without a browser. */

/**
 * A round upper bound at or above `max` and evenly spaced ticks from 0 to it.
 *
 * @example
 * niceTicks(87) // { max: 100, ticks: [0, 25, 50, 75, 100] }
 */
export function niceTicks(max: number, count = 4): { max: number; ticks: number[] } {
  if (!(max > 0)) return { max: 1, ticks: [0, 1] };
  const rough = max / count;
  const magnitude = 10 ** Math.floor(Math.log10(rough));
  const step = [1, 2, 2.5, 5, 10].map((m) => m * magnitude).find((s) => s >= rough) ?? 10 * magnitude;
  const top = Math.ceil(max / step) * step;
  const ticks: number[] = [];
  for (let v = 0; v <= top + step / 2; v += step) ticks.push(Math.round(v * 1e9) / 1e9);
  return { max: top, ticks };
}

/** Every n-th label so that at most `room` fit under a chart. */
export function labelEvery(count: number, room: number): number {
  return Math.max(1, Math.ceil(count / Math.max(1, room)));
}

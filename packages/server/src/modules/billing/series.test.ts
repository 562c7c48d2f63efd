import { describe, expect, it } from 'vitest';
import { fillDays, windowStart } from './series.js';

describe('daily ledger series', () => {
  const now = new Date('2026-03-01T05:00:00.000Z');

  it('starts at the UTC midnight days-1 days before today, across a month end', () => {
    expect(windowStart(1, now).toISOString()).toBe('2026-03-01T00:00:00.000Z');
    expect(windowStart(3, now).toISOString()).toBe('2026-02-27T00:00:00.000Z');
  });

  it('fills the days without rows with zeros, oldest first, and keeps the ones with rows', () => {
    const filled = fillDays([{ date: '2026-02-28', spend_cents: 40, credit_cents: 5 }], 3, now);
    expect(filled).toEqual([
      { date: '2026-02-27', spend_cents: 0, credit_cents: 0 },
      { date: '2026-02-28', spend_cents: 40, credit_cents: 5 },
      { date: '2026-03-01', spend_cents: 0, credit_cents: 0 },
    ]);
  });

  it('ignores rows outside the window', () => {
    expect(
      fillDays([{ date: '2026-01-01', spend_cents: 9, credit_cents: 9 }], 2, now).map((d) => d.spend_cents),
    ).toEqual([0, 0]);
  });
});

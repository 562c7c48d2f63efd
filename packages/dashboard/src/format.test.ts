import { describe, expect, it } from 'vitest';
import { ago, duration, money, percent, short, signedMoney } from './format';

describe('formatting', () => {
  it('shows cents as Canadian dollars, never a bare $, with a sign for ledger rows', () => {
    expect(money(1250)).toBe('CA$12.50');
    expect(money(500)).toBe('CA$5.00');
    expect(money(0)).toBe('CA$0.00');
    expect(money(7)).toBe('CA$0.07');
    expect(money(-125)).toBe('-CA$1.25');
    expect(money(123_456_789)).toBe('CA$1,234,567.89');
    expect(signedMoney(-12)).toBe('−CA$0.12');
    expect(signedMoney(500)).toBe('+CA$5.00');
  });

  it("writes CA$ whatever Intl says about CAD in the reader's locale", () => {
    // What Intl's currency style would have printed: '$5.00' in en-CA, the dashboard's locale.
    expect(new Intl.NumberFormat('en-CA', { style: 'currency', currency: 'CAD' }).format(5)).toBe('$5.00');
    expect(money(500)).not.toMatch(/(^|[^A])\$/);
  });

  it('says how long ago, coarsely', () => {
    const now = Date.parse('2026-11-21T18:00:00Z');
    expect(ago(null, now)).toBe('never');
    expect(ago('2026-11-21T17:59:58Z', now)).toBe('just now');
    expect(ago('2026-11-21T17:59:30Z', now)).toBe('30 s ago');
    expect(ago('2026-11-21T17:58:30Z', now)).toBe('1 min ago');
    expect(ago('2026-11-21T15:00:00Z', now)).toBe('3 h ago');
    expect(ago('2026-11-19T18:00:00Z', now)).toBe('2 d ago');
  });

  it('shows durations, ratios and long ids compactly', () => {
    expect(duration(850)).toBe('850 ms');
    expect(duration(5000)).toBe('5.0 s');
    expect(duration(90_000)).toBe('1.5 min');
    expect(percent(0.995)).toBe('99.5 %');
    expect(percent(1)).toBe('100 %');
    expect(short('job_01m801an4wp176rv55s89kydw1', 8)).toBe('job_01m8…9kydw1');
    expect(short('node_1', 8)).toBe('node_1');
  });
});

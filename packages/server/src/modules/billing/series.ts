/** One UTC day of the ledger: what was spent (charges) and credited (grants, top-ups, earnings). */
export interface DayTotals {
  date: string;
  spend_cents: number;
  credit_cents: number;
}

const DAY_MS = 86_400_000;

/** The first UTC midnight of a `days`-day window that ends today (UTC). */
export function windowStart(days: number, now: Date): Date {
  const today = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate());
  return new Date(today - (days - 1) * DAY_MS);
}

/**
 * One entry per UTC day of the window, oldest first, with zeros for days without ledger rows.
 * Pure: the store gives the days that had rows, this fills the gaps.
 *
 * @example
 * fillDays([{ date: '2026-11-20', spend_cents: 12, credit_cents: 0 }], 2, new Date('2026-11-21T10:00:00Z'))
 * // [{ date: '2026-11-20', spend_cents: 12, credit_cents: 0 }, { date: '2026-11-21', spend_cents: 0, credit_cents: 0 }]
 */
export function fillDays(rows: readonly DayTotals[], days: number, now: Date): DayTotals[] {
  const byDate = new Map(rows.map((r) => [r.date, r]));
  const start = windowStart(days, now).getTime();
  return Array.from({ length: days }, (_, i) => {
    const date = new Date(start + i * DAY_MS).toISOString().slice(0, 10);
    const row = byDate.get(date);
    return { date, spend_cents: row?.spend_cents ?? 0, credit_cents: row?.credit_cents ?? 0 };
  });
}

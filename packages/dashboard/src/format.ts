/** Formatting shared by every page. Pure: tested without a browser. */

// Digits only: the currency is written out, because Intl's symbol for CAD depends on the locale
// ('$' in en-CA, 'CA$' in en-US, '5,00 $' in fr-CA) and a bare '$' reads as US dollars.
const digits = new Intl.NumberFormat('en-CA', { maximumFractionDigits: 0 });

/**
 * Cents as Canadian dollars, the one way every page shows money: `CA$`, grouped, two decimals.
 *
 * @example
 * money(1250) // 'CA$12.50'
 * money(-125) // '-CA$1.25'
 */
export function money(cents: number): string {
  const whole = Math.round(Math.abs(cents));
  const fraction = String(whole % 100).padStart(2, '0');
  return `${cents < 0 && whole > 0 ? '-' : ''}CA$${digits.format(Math.floor(whole / 100))}.${fraction}`;
}

/** A signed amount for ledger rows: `+CA$5.00`, `−CA$0.12`. */
export function signedMoney(cents: number): string {
  return `${cents < 0 ? '−' : '+'}${money(Math.abs(cents))}`;
}

const dateTime = new Intl.DateTimeFormat('en-CA', { dateStyle: 'medium', timeStyle: 'short' });

/** An ISO date-time for people, or a dash for none. */
export function when(iso: string | null | undefined): string {
  if (!iso) return '—';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : dateTime.format(d);
}

/**
 * How long ago, coarsely.
 *
 * @example
 * ago(new Date(Date.now() - 90_000).toISOString()) // '1 min ago'
 */
export function ago(iso: string | null | undefined, now = Date.now()): string {
  if (!iso) return 'never';
  const seconds = Math.round((now - new Date(iso).getTime()) / 1000);
  if (!Number.isFinite(seconds)) return iso;
  if (seconds < 5) return 'just now';
  if (seconds < 60) return `${seconds} s ago`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
  if (seconds < 86_400) return `${Math.floor(seconds / 3600)} h ago`;
  return `${Math.floor(seconds / 86_400)} d ago`;
}

/** Milliseconds for people: `850 ms`, `2.4 s`. */
export function duration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${(ms / 60_000).toFixed(1)} min`;
}

/** A ratio as a percentage with up to two decimals: `99.5 %`. */
export function percent(ratio: number): string {
  return `${(Math.round(ratio * 10_000) / 100).toString()} %`;
}

/** The first and last characters of a long hex string or id, for tables. */
export function short(value: string, keep = 10): string {
  return value.length <= keep * 2 + 1 ? value : `${value.slice(0, keep)}…${value.slice(-6)}`;
}

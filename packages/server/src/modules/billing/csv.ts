/**
 * RFC 4180 CSV: CRLF line ends, a header row, fields holding a comma, a double quote, CR or LF
 * quoted, quotes doubled. Text that a spreadsheet would run as a formula (starting with `=`, `+`,
 * `-`, `@`, tab or CR) is prefixed with `'`, so an exported description cannot execute; numbers
 * are written as numbers. Pure.
 */
export type CsvValue = string | number | null;

const FORMULA_START = /^[=+\-@\t\r]/;

function field(value: CsvValue): string {
  if (value === null) return '';
  if (typeof value === 'number') return String(value);
  const text = FORMULA_START.test(value) ? `'${value}` : value;
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

/**
 * @example
 * toCsv(['id', 'description'], [['tx_1', 'a, "b"']]); // 'id,description\r\ntx_1,"a, ""b"""\r\n'
 */
export function toCsv(header: readonly string[], rows: readonly (readonly CsvValue[])[]): string {
  return [header, ...rows].map((row) => row.map(field).join(',') + '\r\n').join('');
}

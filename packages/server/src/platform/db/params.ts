import { prepareValue } from 'pg/lib/utils.js';

/** Characters JSON.stringify would escape otherwise than an array literal does (control characters, lone surrogates). */
// eslint-disable-next-line no-control-regex -- the control characters are what it looks for
const JSON_ONLY_ESCAPES = /[\u0000-\u001f\ud800-\udfff]/;

/**
 * A JavaScript value as both stores send it as a parameter: node-postgres's `prepareValue` (text,
 * or a Buffer for bytea; null for null and undefined), with a faster path for the store modules'
 * multi-row statements, whose columns go as arrays of text (`unnest($1::text[], ...)`): an array
 * of strings and nulls is written by one native `JSON.stringify`, the literal PostgreSQL reads the
 * same as node-postgres's (each string double-quoted with `"` and `\` escaped, `null` unquoted
 * for NULL). Any other array, or a string holding characters JSON escapes differently (control
 * characters, surrogates), takes node-postgres's path.
 *
 * @example
 * paramValue(['a', null, 'say "hi"']); // '{"a",null,"say \"hi\""}'
 * paramValue(42); // '42'
 */
export function paramValue(value: unknown): string | Buffer | null {
  if (!Array.isArray(value)) return prepareValue(value);
  for (const element of value as unknown[]) {
    if (element === null || element === undefined) continue;
    if (typeof element !== 'string' || JSON_ONLY_ESCAPES.test(element)) return prepareValue(value);
  }
  const json = JSON.stringify(value);
  return `{${json.slice(1, -1)}}`;
}

/** {@link paramValue} over a statement's parameters. */
export function paramValues(params: readonly unknown[]): (string | Buffer | null)[] {
  return params.map(paramValue);
}

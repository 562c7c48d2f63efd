import canonicalize from 'canonicalize';
import { ProtocolError } from './errors.js';

/** The JSON Pointer of the value at `keys` (built only for an error: most values pass). */
function pointer(keys: (string | number)[]): string {
  return keys.map((key) => `/${String(key).replaceAll('~', '~0').replaceAll('/', '~1')}`).join('');
}

/**
 * Rejects what JSON cannot carry faithfully. `JSON.stringify` (and so the canonicalize package)
 * silently drops `undefined` properties and turns them into `null` in arrays; a hash over such
 * a value would not be the hash of what the API returns, so we refuse instead. `keys` is the path
 * walked so far (pushed and popped in place).
 */
function assertJsonValue(value: unknown, keys: (string | number)[], seen: Set<object>): void {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return;
    case 'number':
      if (!Number.isFinite(value)) throw new ProtocolError(`${String(value)} is not valid JSON`, pointer(keys));
      return;
    case 'object':
      break;
    default:
      throw new ProtocolError(`a value of type ${typeof value} is not valid JSON`, pointer(keys));
  }
  if (value === null) return;
  if (seen.has(value)) throw new ProtocolError('circular reference', pointer(keys));
  seen.add(value);
  const toJSON: unknown = 'toJSON' in value ? value.toJSON : undefined;
  if (typeof toJSON === 'function') {
    assertJsonValue((toJSON as () => unknown).call(value), keys, seen);
  } else if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      keys.push(i);
      assertJsonValue(value[i], keys, seen);
      keys.pop();
    }
  } else {
    for (const key in value) {
      if (!Object.prototype.hasOwnProperty.call(value, key)) continue;
      keys.push(key);
      assertJsonValue((value as Record<string, unknown>)[key], keys, seen);
      keys.pop();
    }
  }
  seen.delete(value);
}

/**
 * RFC 8785 JSON Canonicalization Scheme (JCS): object keys sorted by UTF-16 code units, no
 * whitespace, ECMAScript number formatting. Throws {@link ProtocolError} (with the JSON Pointer
 * of the field) on `undefined`, functions, symbols, bigints, `NaN`/`Infinity`, lone surrogates
 * and cycles.
 *
 * @example
 * canonicalJson({ b: 1, a: [true, 'x'] }); // '{"a":[true,"x"],"b":1}'
 */
export function canonicalJson(value: unknown): string {
  assertJsonValue(value, [], new Set());
  let text: string | undefined;
  try {
    text = canonicalize(value);
  } catch (err) {
    throw new ProtocolError(err instanceof Error ? err.message : 'value is not valid JSON', '');
  }
  if (text === undefined) throw new ProtocolError('value is not valid JSON', '');
  return text;
}

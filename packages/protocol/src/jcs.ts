import canonicalize from 'canonicalize';
import { ProtocolError } from './errors.js';

function pointer(path: string, key: string | number): string {
  return `${path}/${String(key).replaceAll('~', '~0').replaceAll('/', '~1')}`;
}

/**
 * Rejects what JSON cannot carry faithfully. `JSON.stringify` (and so the canonicalize package)
 * silently drops `undefined` properties and turns them into `null` in arrays; a hash over such
 * a value would not be the hash of what the API returns, so we refuse instead.
 */
function assertJsonValue(value: unknown, path: string, seen: Set<object>): void {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return;
    case 'number':
      if (!Number.isFinite(value)) throw new ProtocolError(`${String(value)} is not valid JSON`, path);
      return;
    case 'object':
      break;
    default:
      throw new ProtocolError(`a value of type ${typeof value} is not valid JSON`, path);
  }
  if (value === null) return;
  if (seen.has(value)) throw new ProtocolError('circular reference', path);
  seen.add(value);
  const toJSON: unknown = 'toJSON' in value ? value.toJSON : undefined;
  if (typeof toJSON === 'function') {
    assertJsonValue((toJSON as () => unknown).call(value), path, seen);
  } else if (Array.isArray(value)) {
    value.forEach((item: unknown, i) => {
      assertJsonValue(item, pointer(path, i), seen);
    });
  } else {
    for (const [key, item] of Object.entries(value)) assertJsonValue(item, pointer(path, key), seen);
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
  assertJsonValue(value, '', new Set());
  let text: string | undefined;
  try {
    text = canonicalize(value);
  } catch (err) {
    throw new ProtocolError(err instanceof Error ? err.message : 'value is not valid JSON', '');
  }
  if (text === undefined) throw new ProtocolError('value is not valid JSON', '');
  return text;
}

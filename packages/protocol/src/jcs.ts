import { ProtocolError } from './errors.js';

/** The JSON Pointer of the value at `keys` (built only for an error: most values pass). */
function pointer(keys: readonly (string | number)[]): string {
  return keys.map((key) => `/${String(key).replaceAll('~', '~0').replaceAll('/', '~1')}`).join('');
}

/**
 * A refusal on its way up: each object or array it passes through adds the key it was at, so
 * the success path keeps no path at all. `keys` is innermost first.
 */
class Refusal {
  readonly keys: (string | number)[] = [];
  constructor(readonly message: string) {}
}

/** What one call of {@link canonicalJson} carries down the walk. */
interface Walk {
  /** The objects and arrays being serialized, outermost first (a cycle comes back to one). */
  ancestors: object[];
  /** A string or key with a lone surrogate was met (refused once the walk found nothing else). */
  loneSurrogate: boolean;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
/** No lone surrogate: `String.prototype.isWellFormed` where it exists (Node 20; the verifier also runs in browsers). */
const isWellFormed: (text: string) => boolean =
  typeof (String.prototype as { isWellFormed?: unknown }).isWellFormed === 'function'
    ? (text) => (text as unknown as { isWellFormed(): boolean }).isWellFormed()
    : (text) => !LONE_SURROGATE.test(text);

/** A string as JSON.stringify writes it (minimal escapes, lowercase `\u00xx`), as RFC 8785 asks. */
function stringOf(text: string, walk: Walk): string {
  if (!NEEDS_CARE.test(text)) return '"' + text + '"';
  if (!isWellFormed(text)) walk.loneSurrogate = true;
  return JSON.stringify(text);
}

/** What JSON.stringify escapes, and surrogates (which may be lone). */
// eslint-disable-next-line no-control-regex -- the control characters are what it looks for
const NEEDS_CARE = /[\u0000-\u001f"\\\ud800-\udfff]/;

/** Own enumerable string keys in UTF-16 code unit order (insertion sort: objects here are small). */
function sortedKeys(object: object): string[] {
  const keys = Object.keys(object);
  for (let i = 1; i < keys.length; i++) {
    const key = keys[i] as string;
    let j = i - 1;
    while (j >= 0 && (keys[j] as string) > key) {
      keys[j + 1] = keys[j] as string;
      j--;
    }
    keys[j + 1] = key;
  }
  return keys;
}

function serialize(value: unknown, walk: Walk): string {
  switch (typeof value) {
    case 'string':
      return stringOf(value, walk);
    case 'number':
      if (!Number.isFinite(value)) throw new Refusal(`${String(value)} is not valid JSON`);
      // ECMAScript Number::toString, as JSON.stringify (and RFC 8785) writes it; -0 gives "0".
      return String(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'object':
      break;
    default:
      throw new Refusal(`a value of type ${typeof value} is not valid JSON`);
  }
  if (value === null) return 'null';
  const { ancestors } = walk;
  if (ancestors.includes(value)) throw new Refusal('circular reference');
  const toJSON: unknown = (value as { toJSON?: unknown }).toJSON;
  ancestors.push(value);
  let text: string;
  if (typeof toJSON === 'function') {
    // As JSON.stringify: the value is what toJSON returns, at the same place.
    text = serialize((toJSON as () => unknown).call(value), walk);
  } else if (Array.isArray(value)) {
    text = '[';
    let i = 0;
    try {
      for (; i < value.length; i++) text += (i === 0 ? '' : ',') + serialize(value[i], walk);
    } catch (err) {
      if (err instanceof Refusal) err.keys.push(i);
      throw err;
    }
    text += ']';
  } else {
    const keys = sortedKeys(value);
    text = '{';
    let key = '';
    try {
      for (let i = 0; i < keys.length; i++) {
        key = keys[i] as string;
        text +=
          (i === 0 ? '' : ',') + stringOf(key, walk) + ':' + serialize((value as Record<string, unknown>)[key], walk);
      }
    } catch (err) {
      if (err instanceof Refusal) err.keys.push(key);
      throw err;
    }
    text += '}';
  }
  ancestors.pop();
  return text;
}

/**
 * RFC 8785 JSON Canonicalization Scheme (JCS): object keys sorted by UTF-16 code units, no
 * whitespace, ECMAScript number formatting. Throws {@link ProtocolError} (with the JSON Pointer
 * of the field) on `undefined`, functions, symbols, bigints, `NaN`/`Infinity` and cycles, which
 * `JSON.stringify` would drop or turn into `null` (a hash over such a value would not be the hash
 * of what the API returns), and on lone surrogates (pointer `""`, and only when nothing else is
 * refused). With several refusals, the first in canonical order is named.
 *
 * One walk validates and writes (docs/decisions.md says why this is not the `canonicalize`
 * package, which the tests keep as the reference).
 *
 * @example
 * canonicalJson({ b: 1, a: [true, 'x'] }); // '{"a":[true,"x"],"b":1}'
 */
export function canonicalJson(value: unknown): string {
  const walk: Walk = { ancestors: [], loneSurrogate: false };
  let text: string;
  try {
    text = serialize(value, walk);
  } catch (err) {
    if (err instanceof Refusal) throw new ProtocolError(err.message, pointer(err.keys.reverse()));
    throw err;
  }
  if (walk.loneSurrogate) throw new ProtocolError('Lone surrogate is not allowed', '');
  return text;
}

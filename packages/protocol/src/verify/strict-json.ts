// A strict JSON reader for untrusted bundles. `JSON.parse` silently keeps the last of two
// duplicate keys, so a bundle could show a reader one value and a hasher another; here a
// duplicate key, trailing data, excessive nesting or an oversized input is an error.

/** Why a text is not acceptable JSON, with the character offset where that was found. */
export class StrictJsonError extends Error {
  override readonly name = 'StrictJsonError';
  readonly offset: number;

  constructor(message: string, offset: number) {
    super(`${message} at character ${offset}`);
    this.offset = offset;
  }
}

export interface StrictJsonOptions {
  /** Largest accepted input, in UTF-8 bytes. Default 16 MiB. */
  maxBytes?: number;
  /** Deepest accepted nesting of arrays and objects. Default 64. */
  maxDepth?: number;
}

export const STRICT_JSON_DEFAULT_MAX_BYTES = 16 * 1024 * 1024;
const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
// JSON strings may not hold raw control characters: the class excludes them on purpose.
// eslint-disable-next-line no-control-regex
const STRING = /"(?:[^"\\\u0000-\u001f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"/y;
const WHITESPACE = /[ \t\n\r]*/y;

/**
 * Parses JSON (RFC 8259) strictly: duplicate object keys, anything after the value, nesting
 * deeper than `maxDepth` and input larger than `maxBytes` are refused with {@link StrictJsonError}.
 *
 * @example
 * parseStrictJson('{"a":1}'); // { a: 1 }
 * parseStrictJson('{"a":1,"a":2}'); // throws: duplicate key "a"
 */
export function parseStrictJson(text: string, options: StrictJsonOptions = {}): unknown {
  const maxBytes = options.maxBytes ?? STRICT_JSON_DEFAULT_MAX_BYTES;
  const maxDepth = options.maxDepth ?? 64;
  // UTF-16 length is a lower bound of the UTF-8 length: cheap rejection first, exact count after.
  if (text.length > maxBytes || new TextEncoder().encode(text).length > maxBytes) {
    throw new StrictJsonError(`input is larger than ${maxBytes} bytes`, 0);
  }
  let at = 0;

  const skip = (): void => {
    WHITESPACE.lastIndex = at;
    WHITESPACE.exec(text);
    at = WHITESPACE.lastIndex;
  };
  const token = (re: RegExp, what: string): string => {
    re.lastIndex = at;
    const match = re.exec(text);
    if (!match) throw new StrictJsonError(`expected ${what}`, at);
    at = re.lastIndex;
    return match[0];
  };
  const literal = (word: string, value: unknown): unknown => {
    if (!text.startsWith(word, at)) throw new StrictJsonError('unexpected character', at);
    at += word.length;
    return value;
  };

  const value = (depth: number): unknown => {
    skip();
    const c = text[at];
    if (c === '{' || c === '[') {
      if (depth >= maxDepth) throw new StrictJsonError(`nesting deeper than ${maxDepth}`, at);
      return c === '{' ? object(depth + 1) : array(depth + 1);
    }
    if (c === '"') return JSON.parse(token(STRING, 'a string')) as string;
    if (c === 't') return literal('true', true);
    if (c === 'f') return literal('false', false);
    if (c === 'n') return literal('null', null);
    if (c === '-' || (c !== undefined && c >= '0' && c <= '9')) return Number(token(NUMBER, 'a number'));
    throw new StrictJsonError(c === undefined ? 'unexpected end of input' : 'unexpected character', at);
  };

  const object = (depth: number): Record<string, unknown> => {
    at++;
    const out: Record<string, unknown> = {};
    const seen = new Set<string>();
    skip();
    if (text[at] === '}') {
      at++;
      return out;
    }
    for (;;) {
      skip();
      const keyAt = at;
      const key = JSON.parse(token(STRING, 'a property name')) as string;
      if (seen.has(key)) throw new StrictJsonError(`duplicate key ${JSON.stringify(key)}`, keyAt);
      seen.add(key);
      skip();
      if (text[at] !== ':') throw new StrictJsonError("expected ':'", at);
      at++;
      // defineProperty: a "__proto__" key must become data, not change the prototype.
      Object.defineProperty(out, key, { value: value(depth), enumerable: true, writable: true, configurable: true });
      skip();
      if (text[at] === ',') {
        at++;
        continue;
      }
      if (text[at] === '}') {
        at++;
        return out;
      }
      throw new StrictJsonError("expected ',' or '}'", at);
    }
  };

  const array = (depth: number): unknown[] => {
    at++;
    const out: unknown[] = [];
    skip();
    if (text[at] === ']') {
      at++;
      return out;
    }
    for (;;) {
      out.push(value(depth));
      skip();
      if (text[at] === ',') {
        at++;
        continue;
      }
      if (text[at] === ']') {
        at++;
        return out;
      }
      throw new StrictJsonError("expected ',' or ']'", at);
    }
  };

  const result = value(0);
  skip();
  if (at !== text.length) throw new StrictJsonError('unexpected data after the JSON value', at);
  return result;
}

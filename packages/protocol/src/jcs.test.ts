import { describe, expect, it, vi } from 'vitest';
import canonicalize from 'canonicalize';
import { ProtocolError } from './errors.js';
import { canonicalJson } from './jcs.js';
import { canonicalSha256Hex, sha256Hex } from './keys.js';

function pathOf(value: unknown): string | undefined {
  try {
    canonicalJson(value);
  } catch (err) {
    if (err instanceof ProtocolError) return err.path;
    throw err;
  }
  return 'did not throw';
}

describe('canonicalJson (RFC 8785)', () => {
  it('sorts keys, drops whitespace and keeps array order', () => {
    const value = { b: 1, a: [3, { d: null, c: true }], '': 'x' };
    expect(canonicalJson(value)).toBe('{"":"x","a":[3,{"c":true,"d":null}],"b":1}');
  });

  it('formats numbers as ECMAScript does (RFC 8785 section 3.2.2.3 examples)', () => {
    // The RFC writes 333333333.33333329, more digits than a double holds.
    expect(canonicalJson([Number('333333333.33333329'), 1e30, 4.5, 2e-3, 1e-27, -0, 1e21, 1e-7])).toBe(
      '[333333333.3333333,1e+30,4.5,0.002,1e-27,0,1e+21,1e-7]',
    );
  });

  it('escapes strings minimally (RFC 8785 section 3.2.2.2)', () => {
    expect(canonicalJson('\u20ac$\u000F\u000aA\'\u0042\u0022\u005c\\"/')).toBe('"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"');
  });

  it('sorts keys by UTF-16 code units (RFC 8785 section 3.2.3 example)', () => {
    const input = { '\u20ac': 1, '\r': 2, '\ufb33': 3, '1': 4, '\ud83d\ude00': 5, '\u0080': 6, '\u00f6': 7 };
    expect(canonicalJson(input)).toBe('{"\\r":2,"1":4,"\u0080":6,"\u00f6":7,"\u20ac":1,"\ud83d\ude00":5,"\ufb33":3}');
  });

  it('uses toJSON, as JSON.stringify does', () => {
    expect(canonicalJson({ at: new Date('2026-11-21T18:00:00.000Z') })).toBe('{"at":"2026-11-21T18:00:00.000Z"}');
  });

  it.each<[unknown, string]>([
    [undefined, ''],
    [{ a: undefined }, '/a'],
    [{ a: [1, undefined] }, '/a/1'],
    [{ a: Number.NaN }, '/a'],
    [{ 'a/b': { c: Infinity } }, '/a~1b/c'],
    [[-Infinity], '/0'],
    [{ f: () => 1 }, '/f'],
    [{ s: Symbol('s') }, '/s'],
    [{ n: 1n }, '/n'],
    ['\ud800', ''],
  ])('rejects %s at %j', (value, path) => {
    expect(pathOf(value)).toBe(path);
  });

  it('rejects cycles', () => {
    const cycle: Record<string, unknown> = {};
    cycle.self = cycle;
    expect(pathOf(cycle)).toBe('/self');
  });

  it('accepts a shared (non-cyclic) reference twice', () => {
    const shared = { x: 1 };
    expect(canonicalJson({ a: shared, b: shared })).toBe('{"a":{"x":1},"b":{"x":1}}');
  });
});

describe('canonicalSha256Hex', () => {
  it('hashes the UTF-8 of the canonical form', () => {
    expect(canonicalSha256Hex({ b: 'é', a: 1 })).toBe(sha256Hex('{"a":1,"b":"é"}'));
  });
});

// The differential test: the `canonicalize` package (the field's RFC 8785 library, which
// canonicalJson replaced for speed) is the reference for every byte.
describe('canonicalJson against the canonicalize package', () => {
  /** mulberry32: a seeded generator, so a failure reproduces. */
  function generator(seed: number) {
    let state = seed >>> 0;
    const next = () => {
      state = (state + 0x6d2b79f5) >>> 0;
      let t = state;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
    const int = (n: number) => Math.floor(next() * n);
    const pick = <T>(items: readonly T[]): T => items[int(items.length)] as T;
    return { next, int, pick };
  }
  type Random = ReturnType<typeof generator>;

  const EDGE_NUMBERS = [
    0,
    -0,
    1,
    -1,
    0.1,
    1e21,
    1e-7,
    1e20,
    1e-6,
    5e-324,
    -5e-324,
    Number.MAX_VALUE,
    Number.MIN_VALUE,
    Number.MAX_SAFE_INTEGER,
    Number.MIN_SAFE_INTEGER,
    2 ** 53 + 2,
    333333333.3333333,
    4.5,
    0.002,
    1e-27,
    1e30,
    123456789012345680000,

    1.7976931348623157e308,
    2 ** -1074,
    0.1 + 0.2,
    -1e-7,
    1e21 - 65536,
  ];
  // ASCII, JSON.stringify's escapes (controls, quote, backslash), DEL, Latin-1, the line
  // separators JSON allows raw, a BMP character above the surrogates, astral pairs.
  const CHARS = [
    'a',
    'Z',
    '0',
    ' ',
    '/',
    '~',
    '"',
    '\\',
    '\n',
    '\r',
    '\t',
    '\b',
    '\f',
    '\u0000',
    '\u0001',
    '\u001f',
    '\u007f',
    '\u0080',
    'é',
    '\u00ff',
    '\u2028',
    '\u2029',
    '€',
    '\ufb33',
    '\uffff',
    '\ud83d\ude00',
    '\udbff\udfff',
    '\ud800\udc00',
  ];
  const LONE = ['\ud800', '\udbff', '\udc00', '\udfff'];

  function string(r: Random, lone: boolean): string {
    let text = '';
    const length = r.int(8);
    for (let i = 0; i < length; i++) text += r.pick(CHARS);
    if (lone) {
      const at = r.int(text.length + 1);
      text = text.slice(0, at) + r.pick(LONE) + text.slice(at);
    }
    return text;
  }

  function number(r: Random): number {
    switch (r.int(4)) {
      case 0:
        return r.pick(EDGE_NUMBERS);
      case 1:
        return r.int(2 ** 31) - 2 ** 30;
      case 2: {
        // Any finite double, from random bits.
        const bits = new Uint32Array([r.int(2 ** 32), r.int(2 ** 32)]);
        const value = new Float64Array(bits.buffer)[0] ?? 0;
        return Number.isFinite(value) ? value : 0.5;
      }
      default:
        return (r.next() - 0.5) * 10 ** (r.int(60) - 30);
    }
  }

  function value(r: Random, depth: number, lone: () => boolean): unknown {
    const kind = depth >= 4 ? r.int(5) : r.int(9);
    switch (kind) {
      case 0:
        return null;
      case 1:
        return r.next() < 0.5;
      case 2:
      case 3:
        return number(r);
      case 4:
        return string(r, lone());
      case 5:
      case 6: {
        const object: Record<string, unknown> = {};
        const size = r.int(7);
        for (let i = 0; i < size; i++) {
          const key = r.next() < 0.2 ? String(r.int(20)) : string(r, lone());
          Object.defineProperty(object, key, {
            value: value(r, depth + 1, lone),
            enumerable: true,
            writable: true,
            configurable: true,
          });
        }
        return object;
      }
      case 7:
        return Array.from({ length: r.int(6) }, () => value(r, depth + 1, lone));
      default: {
        if (r.next() < 0.5) return new Date(r.int(2 ** 40));
        const replaced = value(r, depth + 1, lone);
        return { toJSON: () => ({ replaced }), ignored: 1 };
      }
    }
  }

  /** Compares `serialize` with the package on `count` generated values; returns how many had a lone surrogate. */
  function differential(serialize: (value: unknown) => string, count: number): number {
    let withLone = 0;
    for (let seed = 1; seed <= count; seed++) {
      const r = generator(seed);
      const input = value(r, 0, () => r.next() < 0.01);
      let expected: string | undefined;
      try {
        expected = canonicalize(input);
      } catch (err) {
        expect((err as Error).message, `seed ${seed}`).toBe('Lone surrogate is not allowed');
      }
      if (expected === undefined) {
        withLone++;
        expect(() => serialize(input), `seed ${seed}`).toThrow(
          expect.objectContaining({ path: '', message: 'Lone surrogate is not allowed' }),
        );
      } else {
        expect(serialize(input), `seed ${seed}`).toBe(expected);
      }
    }
    return withLone;
  }

  it('gives the same bytes on 4,000 generated values, and refuses the same lone surrogates', () => {
    expect(differential(canonicalJson, 4000)).toBeGreaterThan(50);
  });

  it('finds lone surrogates alike without String.prototype.isWellFormed (older browsers run the verifier)', async () => {
    const proto = String.prototype as { isWellFormed?: unknown };
    const original = Object.getOwnPropertyDescriptor(proto, 'isWellFormed');
    delete proto.isWellFormed;
    try {
      vi.resetModules();
      const fallback = await import('./jcs.js');
      expect(differential(fallback.canonicalJson, 1500)).toBeGreaterThan(10);
    } finally {
      if (original) Object.defineProperty(proto, 'isWellFormed', original);
      vi.resetModules();
    }
  });

  const REFUSED: [unknown, string][] = [
    [undefined, 'a value of type undefined is not valid JSON'],
    [() => 1, 'a value of type function is not valid JSON'],
    [Symbol('s'), 'a value of type symbol is not valid JSON'],
    [1n, 'a value of type bigint is not valid JSON'],
    [Number.NaN, 'NaN is not valid JSON'],
    [Infinity, 'Infinity is not valid JSON'],
    [-Infinity, '-Infinity is not valid JSON'],
  ];

  /** Puts one refused value (or a cycle) somewhere in `root`; returns its JSON Pointer, or undefined. */
  function plant(r: Random, root: unknown, bad: unknown): string | undefined {
    let node = root;
    const keys: string[] = [];
    const ancestors: object[] = [];
    for (;;) {
      if (typeof node !== 'object' || node === null || node instanceof Date || 'toJSON' in node) return undefined;
      ancestors.push(node);
      const key: string | number = Array.isArray(node) ? r.int(node.length + 1) : string(r, false);
      const child = (node as Record<string, unknown>)[key];
      const descend = typeof child === 'object' && child !== null && r.next() < 0.6;
      keys.push(String(key).replaceAll('~', '~0').replaceAll('/', '~1'));
      if (!descend) {
        (node as Record<string | number, unknown>)[key] = bad === 'cycle' ? r.pick(ancestors) : bad;
        return keys.map((k) => `/${k}`).join('');
      }
      node = child;
    }
  }

  it('refuses one planted bad value or cycle at its JSON Pointer, in 3,000 generated values', () => {
    let planted = 0;
    for (let seed = 1; seed <= 3000; seed++) {
      const r = generator(seed * 7919);
      const root = { body: value(r, 1, () => r.next() < 0.01) };
      const [bad, message] = r.next() < 0.15 ? ['cycle', 'circular reference'] : r.pick(REFUSED);
      const at = plant(r, root, bad);
      if (at === undefined) continue;
      planted++;
      let caught: unknown;
      try {
        canonicalJson(root);
      } catch (err) {
        caught = err;
      }
      expect(caught, `seed ${seed}`).toBeInstanceOf(ProtocolError);
      expect(
        { path: (caught as ProtocolError).path, message: (caught as ProtocolError).message },
        `seed ${seed}`,
      ).toEqual({
        path: at,
        message,
      });
    }
    expect(planted).toBeGreaterThan(2000);
  });

  it('names another refusal before a lone surrogate, as the validating walk did', () => {
    expect(pathOf({ a: '\ud800', b: [1, undefined] })).toBe('/b/1');
    expect(pathOf({ '\udc00': 1, z: Number.NaN })).toBe('/z');
  });

  it('serialises objects as canonicalize does: own enumerable string keys, wrappers as objects', () => {
    const inherited = Object.create({ up: 1 }) as Record<string, unknown>;
    inherited.own = 2;
    Object.defineProperty(inherited, 'hidden', { value: 3, enumerable: false });
    const values = [
      inherited,
      { [Symbol('s')]: 1, a: 1 },
      Object.assign(Object.create(null) as object, { b: 1, a: 2 }),
      new Map([['a', 1]]),
      new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]),
      Buffer.from('hi'),
      [new Date(0), { toJSON: () => 'x' }],
    ];
    for (const v of values) expect(canonicalJson(v)).toBe(canonicalize(v));
  });
});

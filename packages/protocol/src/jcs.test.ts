import { describe, expect, it } from 'vitest';
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

import { describe, expect, it } from 'vitest';
import { parseStrictJson, StrictJsonError } from './strict-json.js';

describe('parseStrictJson', () => {
  it('reads what JSON.parse reads', () => {
    const text = '{"a":[1,-2.5e3,true,false,null,"x\\u00e9\\n"],"b":{"c":{}},"d":[]}';
    expect(parseStrictJson(text)).toEqual(JSON.parse(text));
    expect(parseStrictJson(' \n 42 ')).toBe(42);
  });

  it.each([
    ['{"a":1,"a":2}', 'duplicate key "a"'],
    ['{"a":{"b":1,"b":1}}', 'duplicate key "b"'],
    ['{"a":1} x', 'unexpected data after the JSON value'],
    ['{"a":01}', "expected ',' or '}'"],
    ["{'a':1}", 'expected a property name'],
    ['[1,]', 'unexpected character'],
    ['{"a":1,}', 'expected a property name'],
    ['"\u0001"', 'expected a string'],
    ['', 'unexpected end of input'],
    ['NaN', 'unexpected character'],
  ])('refuses %s', (text, message) => {
    expect(() => parseStrictJson(text)).toThrow(StrictJsonError);
    expect(() => parseStrictJson(text)).toThrow(message);
  });

  it('refuses oversized input and deep nesting', () => {
    expect(() => parseStrictJson(`"${'x'.repeat(100)}"`, { maxBytes: 50 })).toThrow('larger than 50 bytes');
    expect(() => parseStrictJson(`"${'é'.repeat(30)}"`, { maxBytes: 50 })).toThrow('larger than 50 bytes');
    expect(() => parseStrictJson('['.repeat(10) + ']'.repeat(10), { maxDepth: 5 })).toThrow('nesting deeper than 5');
  });

  it('keeps a __proto__ key as data', () => {
    const value = parseStrictJson('{"__proto__":{"polluted":true}}') as Record<string, unknown>;
    expect(Object.keys(value)).toEqual(['__proto__']);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});

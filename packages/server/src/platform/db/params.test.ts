import { prepareValue } from 'pg/lib/utils.js';
import { describe, expect, it } from 'vitest';
import { paramValue, paramValues } from './params.js';

describe('parameter values', () => {
  it('writes an array of strings as node-postgres does, byte for byte, by one JSON.stringify', () => {
    const arrays = [
      [],
      ['a'],
      ['id_1', 'id_2', ''],
      ['say "hi"', 'back\\slash', '\\"', 'NULL', '{x,y}', '☃ 𝄞'],
      [JSON.stringify({ usage: { prompt_tokens: 3 }, note: 'a "b" \\ c' })],
    ];
    for (const array of arrays) expect(paramValue(array)).toBe(prepareValue(array));
    const stringify = JSON.stringify;
    let calls = 0;
    JSON.stringify = ((...args: Parameters<typeof stringify>) => (calls++, stringify(...args))) as typeof stringify;
    try {
      paramValue(['a', 'b', 'c']);
    } finally {
      JSON.stringify = stringify;
    }
    expect(calls).toBe(1);
  });

  it('writes null and undefined elements as an unquoted null (NULL to PostgreSQL)', () => {
    expect(paramValue(['a', null, undefined])).toBe('{"a",null,null}');
    expect(prepareValue(['a', null, undefined])).toBe('{"a",NULL,NULL}');
  });

  it("leaves everything else to node-postgres's prepareValue", () => {
    const others: unknown[] = [
      ['tab\there', 'line\nfeed'],
      ['\ud800 lone surrogate'],
      [1, 2, 3],
      ['a', 1],
      [true, false],
      [['nested']],
      [new Date('2026-11-26T10:00:00.000Z')],
      [Buffer.from([1, 2])],
      'text',
      42,
      null,
      undefined,
      { a: 1 },
      Buffer.from([0, 255]),
      new Date('2026-11-26T10:00:00.000Z'),
    ];
    for (const value of others) expect(paramValue(value)).toEqual(prepareValue(value));
    expect(paramValues(['x', ['y'], null])).toEqual(['x', '{"y"}', null]);
  });
});

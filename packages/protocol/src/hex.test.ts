import { describe, expect, it } from 'vitest';
import { ProtocolError } from './errors.js';
import { hexToBytes, isLowerHex } from './hex.js';

describe('isLowerHex', () => {
  it.each([
    ['', undefined, true],
    ['00ff', 2, true],
    ['00ff', undefined, true],
    ['00FF', 2, false],
    ['0ff', undefined, false],
    ['00ff', 3, false],
    ['zz', 1, false],
    [' 00', undefined, false],
    ['00\n', undefined, false],
  ])('isLowerHex(%j, %s) is %s', (value, bytes, expected) => {
    expect(isLowerHex(value, bytes)).toBe(expected);
  });

  it('is false for non-strings', () => {
    expect(isLowerHex(42)).toBe(false);
    expect(isLowerHex(null)).toBe(false);
    expect(isLowerHex(Buffer.from('00', 'hex'))).toBe(false);
  });
});

describe('hexToBytes', () => {
  it('decodes canonical hex', () => {
    expect(hexToBytes('0a0b', 2, '/x')).toEqual(Buffer.from([10, 11]));
  });

  it('throws a ProtocolError carrying the path', () => {
    expect(() => hexToBytes('0A0B', 2, '/result_hash')).toThrow(ProtocolError);
    try {
      hexToBytes('abc', undefined, '/result_hash');
    } catch (err) {
      expect(err).toBeInstanceOf(ProtocolError);
      expect((err as ProtocolError).path).toBe('/result_hash');
    }
  });
});

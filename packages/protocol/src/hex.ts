import { ProtocolError } from './errors.js';

const LOWER_HEX = /^(?:[0-9a-f]{2})*$/;

/**
 * True when `value` is canonical hex: lowercase, an even number of digits and, when
 * `byteLength` is given, exactly that many bytes. Every hex string on the wire is canonical.
 *
 * @example
 * isLowerHex('00ff', 2); // true
 * isLowerHex('00FF', 2); // false: uppercase is not canonical
 */
export function isLowerHex(value: unknown, byteLength?: number): value is string {
  if (typeof value !== 'string' || !LOWER_HEX.test(value)) return false;
  return byteLength === undefined || value.length === byteLength * 2;
}

/**
 * Decodes canonical hex (see {@link isLowerHex}) or throws a {@link ProtocolError} at `path`.
 *
 * @example
 * hexToBytes('0a0b', 2, '/result_hash'); // <Buffer 0a 0b>
 */
export function hexToBytes(value: unknown, byteLength: number | undefined, path: string): Buffer {
  if (!isLowerHex(value, byteLength)) {
    const size = byteLength === undefined ? '' : ` of ${byteLength} bytes (${byteLength * 2} characters)`;
    throw new ProtocolError(`${path.slice(1) || 'value'} must be lowercase hex${size}`, path);
  }
  return Buffer.from(value, 'hex');
}

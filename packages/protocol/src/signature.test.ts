import { generateKeyPairSync } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ProtocolError } from './errors.js';
import { signHex, verifyHex } from './signature.js';
import { NODE_PUBLIC_KEY_HEX, PLATFORM_PUBLIC_KEY_HEX, flipByte, nodeKey } from './test-keys.js';

const message = Buffer.from('some bytes');

describe('signHex / verifyHex', () => {
  it('signs deterministically and verifies with the hex or object public key', () => {
    const signature = signHex(message, nodeKey);
    expect(signature).toMatch(/^[0-9a-f]{128}$/);
    expect(signHex(message, nodeKey)).toBe(signature);
    expect(verifyHex(message, signature, NODE_PUBLIC_KEY_HEX)).toBe(true);
    expect(verifyHex(message, signature, nodeKey)).toBe(true);
  });

  it('rejects another key, another message, a flipped bit', () => {
    const signature = signHex(message, nodeKey);
    expect(verifyHex(message, signature, PLATFORM_PUBLIC_KEY_HEX)).toBe(false);
    expect(verifyHex(Buffer.from('other bytes'), signature, NODE_PUBLIC_KEY_HEX)).toBe(false);
    expect(verifyHex(message, flipByte(signature, 10, 1), NODE_PUBLIC_KEY_HEX)).toBe(false);
  });

  it('never throws on malformed input', () => {
    const signature = signHex(message, nodeKey);
    expect(verifyHex(message, signature.toUpperCase(), NODE_PUBLIC_KEY_HEX)).toBe(false);
    expect(verifyHex(message, `${signature}00`, NODE_PUBLIC_KEY_HEX)).toBe(false);
    expect(verifyHex(message, signature.slice(2), NODE_PUBLIC_KEY_HEX)).toBe(false);
    expect(verifyHex(message, signature, NODE_PUBLIC_KEY_HEX.toUpperCase())).toBe(false);
    expect(verifyHex(message, signature, 'not hex')).toBe(false);
    expect(verifyHex('text' as unknown as Buffer, signature, NODE_PUBLIC_KEY_HEX)).toBe(false);
    const { publicKey: rsa } = generateKeyPairSync('rsa', { modulusLength: 1024 });
    expect(verifyHex(message, signature, rsa)).toBe(false);
  });

  it('refuses to sign with a public or non-Ed25519 key', () => {
    const { privateKey: x25519 } = generateKeyPairSync('x25519');
    expect(() => signHex(message, x25519)).toThrow(ProtocolError);
  });
});

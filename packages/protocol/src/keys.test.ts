import { createPublicKey, generateKeyPairSync, sign, verify } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ProtocolError } from './errors.js';
import { generateEd25519, privateKeyFromSeedHex, publicKeyFromHex, publicKeyHex, seedHex, sha256Hex } from './keys.js';

// RFC 8032, section 7.1, TEST 1: an independent check of the DER handling.
const RFC8032_SECRET = '9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60';
const RFC8032_PUBLIC = 'd75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a';
const RFC8032_SIGNATURE =
  'e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155' +
  '5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b';

describe('Ed25519 keys', () => {
  it('derives the RFC 8032 public key and signature from the seed', () => {
    const key = privateKeyFromSeedHex(RFC8032_SECRET);
    expect(publicKeyHex(key)).toBe(RFC8032_PUBLIC);
    expect(sign(null, Buffer.alloc(0), key).toString('hex')).toBe(RFC8032_SIGNATURE);
    const pub = publicKeyFromHex(RFC8032_PUBLIC);
    expect(verify(null, Buffer.alloc(0), pub, Buffer.from(RFC8032_SIGNATURE, 'hex'))).toBe(true);
  });

  it('round-trips seed -> key -> seed and public hex -> key -> hex', () => {
    const { privateKey, publicKey } = generateEd25519();
    const seed = seedHex(privateKey);
    expect(seed).toMatch(/^[0-9a-f]{64}$/);
    expect(seedHex(privateKeyFromSeedHex(seed))).toBe(seed);
    const hex = publicKeyHex(publicKey);
    expect(publicKeyHex(privateKey)).toBe(hex);
    expect(publicKeyHex(publicKeyFromHex(hex))).toBe(hex);
    expect(createPublicKey(privateKey).equals(publicKeyFromHex(hex))).toBe(true);
  });

  it('rejects uppercase, short and non-hex keys', () => {
    expect(() => publicKeyFromHex(RFC8032_PUBLIC.toUpperCase())).toThrow(ProtocolError);
    expect(() => publicKeyFromHex(RFC8032_PUBLIC.slice(2))).toThrow(ProtocolError);
    expect(() => privateKeyFromSeedHex('zz'.repeat(32))).toThrow(ProtocolError);
  });

  it('rejects keys that are not Ed25519, and a public key where a private one is needed', () => {
    const { privateKey: x25519 } = generateKeyPairSync('x25519');
    expect(() => publicKeyHex(x25519)).toThrow(ProtocolError);
    expect(() => seedHex(publicKeyFromHex(RFC8032_PUBLIC))).toThrow(ProtocolError);
  });

  it("builds a key object once per public key, and derives a key pair's hex once", () => {
    const { privateKey, publicKey } = generateEd25519();
    const hex = publicKeyHex(privateKey);
    expect(publicKeyFromHex(hex)).toBe(publicKeyFromHex(hex));
    expect(publicKeyHex(privateKey)).toBe(hex);
    expect(publicKeyHex(publicKey)).toBe(hex);
    // A refused key is refused every time; nothing about it is kept.
    expect(() => publicKeyFromHex(hex.toUpperCase())).toThrow(ProtocolError);
    expect(() => publicKeyFromHex(hex.toUpperCase())).toThrow(ProtocolError);
  });
});

describe('sha256Hex', () => {
  it('hashes strings as UTF-8 and bytes as given', () => {
    expect(sha256Hex('hello world')).toBe('b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9');
    expect(sha256Hex(new Uint8Array())).toBe('e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855');
    expect(sha256Hex('é')).toBe(sha256Hex(Buffer.from([0xc3, 0xa9])));
  });
});

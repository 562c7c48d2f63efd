import { createPublicKey, verify } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ed25519PublicKeyHexProblem } from './ed25519-point.js';
import { ED25519_SPKI_PREFIX, generateEd25519, publicKeyFromHex, publicKeyHex } from './keys.js';
import { verifyHex } from './signature.js';
import { svc1Message, verifySvc1 } from './svc1.js';
import { verifyEd25519 } from './verify/primitives.js';

interface Vectors {
  small_order_canonical: { hex: string; order: number }[];
  small_order_non_canonical: { hex: string; why: string }[];
  valid: { hex: string }[];
}
const vectors = JSON.parse(
  readFileSync(new URL('../vectors/ed25519-weak-public-keys.json', import.meta.url), 'utf8'),
) as Vectors;

const IDENTITY = `01${'00'.repeat(31)}`;
/** R = identity, S = 0: verifies for every message under the identity key ([S]B = R + [k]A). */
const FORGED_SIGNATURE = `01${'00'.repeat(63)}`;

describe('strict Ed25519 public keys (published vectors)', () => {
  it('names the order of each of the 8 small-order points in their canonical encodings', () => {
    expect(vectors.small_order_canonical).toHaveLength(8);
    for (const { hex, order } of vectors.small_order_canonical) {
      expect([hex, ed25519PublicKeyHexProblem(hex)]).toEqual([
        hex,
        `is a small-order point (order ${order}): signatures under it can be forged`,
      ]);
    }
  });

  it('refuses the 6 non-canonical encodings of small-order points, and any y >= p', () => {
    expect(vectors.small_order_non_canonical).toHaveLength(6);
    for (const { hex } of vectors.small_order_non_canonical)
      expect(ed25519PublicKeyHexProblem(hex)).toMatch(/^is a non-canonical encoding/);
    // y = p + 2 .. 2^255 - 1 (all non-canonical, whether or not they decode to a point).
    for (let low = 0xef; low <= 0xff; low++)
      expect(ed25519PublicKeyHexProblem(`${low.toString(16)}${'ff'.repeat(30)}7f`)).toBe(
        'is a non-canonical encoding (y is not reduced mod p)',
      );
  });

  it('refuses encodings that are not on the curve', () => {
    expect(ed25519PublicKeyHexProblem(`02${'00'.repeat(31)}`)).toBe('is not a point on the Ed25519 curve');
    expect(ed25519PublicKeyHexProblem('00'.repeat(31))).toBe('is not 64 hex characters');
  });

  it('accepts the RFC 8032 keys and freshly generated keys', () => {
    for (const { hex } of vectors.valid) expect(ed25519PublicKeyHexProblem(hex)).toBeUndefined();
    for (let i = 0; i < 50; i++)
      expect(ed25519PublicKeyHexProblem(publicKeyHex(generateEd25519().publicKey))).toBeUndefined();
  });

  it('every weak key is refused by publicKeyFromHex, verifyHex and the offline verifier', async () => {
    for (const { hex } of [...vectors.small_order_canonical, ...vectors.small_order_non_canonical]) {
      expect(() => publicKeyFromHex(hex)).toThrow(/public key is (a small-order point|a non-canonical encoding)/);
      expect(verifyHex(Buffer.from('m'), FORGED_SIGNATURE, hex)).toBe(false);
      expect(await verifyEd25519(hex, Buffer.from('m'), FORGED_SIGNATURE)).toBe(false);
    }
  });

  it('a receipt forged under the identity key verifies with plain node:crypto and WebCrypto, and is refused here', async () => {
    const fields = {
      job_id: 'job_forged',
      node_public_key_hex: IDENTITY,
      result_hash_hex: 'ab'.repeat(32),
      metering_units: 1_000_000,
    };
    const message = svc1Message(fields);
    const raw = createPublicKey({
      key: Buffer.concat([ED25519_SPKI_PREFIX, Buffer.from(IDENTITY, 'hex')]),
      format: 'der',
      type: 'spki',
    });
    // The threat, as the libraries see it: the forgery verifies.
    expect(verify(null, message, raw, Buffer.from(FORGED_SIGNATURE, 'hex'))).toBe(true);
    const webKey = await globalThis.crypto.subtle.importKey(
      'raw',
      Buffer.from(IDENTITY, 'hex'),
      { name: 'Ed25519' },
      false,
      ['verify'],
    );
    expect(
      await globalThis.crypto.subtle.verify({ name: 'Ed25519' }, webKey, Buffer.from(FORGED_SIGNATURE, 'hex'), message),
    ).toBe(true);
    // Refused by every verifier of this package, including with a key object built by hand.
    expect(verifySvc1(fields, FORGED_SIGNATURE)).toBe(false);
    expect(verifyHex(message, FORGED_SIGNATURE, raw)).toBe(false);
    expect(await verifyEd25519(IDENTITY, message, FORGED_SIGNATURE)).toBe(false);
  });
});

import { createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { ed25519PublicKeyProblem } from './ed25519-point.js';
import { ProtocolError } from './errors.js';
import { hexToBytes } from './hex.js';
import { canonicalJson } from './jcs.js';
import { sha256HexOf } from './sha256.js';

/** DER prefix of an Ed25519 SubjectPublicKeyInfo; the raw 32-byte key follows it. */
export const ED25519_SPKI_PREFIX = Buffer.from('302a300506032b6570032100', 'hex');
/** DER prefix of an Ed25519 PKCS#8 PrivateKeyInfo; the raw 32-byte seed follows it. */
export const ED25519_PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');

/** An Ed25519 key pair as node:crypto key objects. */
export interface Ed25519KeyPair {
  publicKey: KeyObject;
  privateKey: KeyObject;
}

/**
 * Generates a fresh Ed25519 key pair.
 *
 * @example
 * const { privateKey, publicKey } = generateEd25519();
 * publicKeyHex(publicKey); // 64 lowercase hex characters
 */
export function generateEd25519(): Ed25519KeyPair {
  return generateKeyPairSync('ed25519');
}

function assertEd25519(key: KeyObject, path: string): void {
  if (key.asymmetricKeyType !== 'ed25519') {
    throw new ProtocolError(`expected an Ed25519 key, got ${key.asymmetricKeyType ?? key.type}`, path);
  }
}

function rawAfterPrefix(der: Buffer, prefix: Buffer, path: string): Buffer {
  if (der.length !== prefix.length + 32 || !der.subarray(0, prefix.length).equals(prefix)) {
    throw new ProtocolError('unexpected Ed25519 DER encoding', path);
  }
  return der.subarray(prefix.length);
}

// Key objects are immutable, so what is derived from one is kept with it: a node signs every
// call with the same key, and a server verifies the same nodes' keys over and over (building a
// key object costs about as much as the verification itself).
const hexByKey = new WeakMap<KeyObject, string>();
const keyByHex = new Map<string, KeyObject>();
const KEYS_KEPT = 4096;

/**
 * The raw 32-byte public key as 64 lowercase hex characters. Accepts a public key or a private
 * key (its public half is derived).
 *
 * @example
 * publicKeyHex(privateKeyFromSeedHex('00'.repeat(32)));
 * // '3b6a27bcceb6a42d62a3a8d02a6f0d73653215771de243a63ac048a18b59da29'
 */
export function publicKeyHex(key: KeyObject): string {
  const known = hexByKey.get(key);
  if (known !== undefined) return known;
  assertEd25519(key, '/public_key');
  const publicKey = key.type === 'private' ? createPublicKey(key) : key;
  const der = publicKey.export({ format: 'der', type: 'spki' });
  const hex = rawAfterPrefix(der, ED25519_SPKI_PREFIX, '/public_key').toString('hex');
  hexByKey.set(key, hex);
  return hex;
}

/**
 * Builds a public key object from 64 lowercase hex characters (the raw key). Refuses (throws)
 * non-canonical encodings and small-order points: node:crypto would accept them, and anyone can
 * forge signatures under a small-order key.
 *
 * @example
 * const key = publicKeyFromHex(receipt.node_public_key);
 */
export function publicKeyFromHex(hex: string): KeyObject {
  const known = keyByHex.get(hex);
  if (known !== undefined) return known;
  const raw = hexToBytes(hex, 32, '/public_key');
  const problem = ed25519PublicKeyProblem(raw);
  if (problem !== undefined) throw new ProtocolError(`public key ${problem}`, '/public_key');
  const der = Buffer.concat([ED25519_SPKI_PREFIX, raw]);
  const key = createPublicKey({ key: der, format: 'der', type: 'spki' });
  // Only well-formed keys reach the map (hexToBytes refuses anything else), and it forgets the
  // oldest once full, so a stream of unknown keys cannot grow it.
  if (keyByHex.size >= KEYS_KEPT) keyByHex.delete(keyByHex.keys().next().value as string);
  keyByHex.set(hex, key);
  return key;
}

const strictByKey = new WeakMap<KeyObject, boolean>();

/**
 * True when a public key object is safe to verify with: a canonical encoding of a point of large
 * order (see {@link ed25519PublicKeyProblem}). Remembered per key object.
 */
export function isStrictPublicKey(key: KeyObject): boolean {
  const known = strictByKey.get(key);
  if (known !== undefined) return known;
  let ok: boolean;
  try {
    ok = ed25519PublicKeyProblem(Buffer.from(publicKeyHex(key), 'hex')) === undefined;
  } catch {
    ok = false;
  }
  strictByKey.set(key, ok);
  return ok;
}

/**
 * Builds a private key object from its 32-byte seed (RFC 8032 secret key) in lowercase hex.
 *
 * @example
 * const key = privateKeyFromSeedHex(process.env.SVC_SIGNING_KEY ?? '');
 */
export function privateKeyFromSeedHex(hex: string): KeyObject {
  const seed = hexToBytes(hex, 32, '/seed');
  const der = Buffer.concat([ED25519_PKCS8_PREFIX, seed]);
  return createPrivateKey({ key: der, format: 'der', type: 'pkcs8' });
}

/**
 * The 32-byte seed of an Ed25519 private key, as lowercase hex (what the data dir stores).
 *
 * @example
 * privateKeyFromSeedHex(seedHex(key)); // the same key
 */
export function seedHex(privateKey: KeyObject): string {
  assertEd25519(privateKey, '/private_key');
  if (privateKey.type !== 'private') throw new ProtocolError('expected a private key', '/private_key');
  const der = privateKey.export({ format: 'der', type: 'pkcs8' });
  return rawAfterPrefix(der, ED25519_PKCS8_PREFIX, '/private_key').toString('hex');
}

/**
 * SHA-256 as lowercase hex. Strings are hashed as their UTF-8 bytes.
 *
 * @example
 * sha256Hex('hello world');
 * // 'b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9'
 */
export function sha256Hex(data: Uint8Array | string): string {
  return sha256HexOf(data);
}

/**
 * Hex SHA-256 of the UTF-8 bytes of `canonicalJson`.
 *
 * @example
 * canonicalSha256Hex({}); // sha256Hex('{}')
 */
export function canonicalSha256Hex(value: unknown): string {
  return sha256Hex(canonicalJson(value));
}

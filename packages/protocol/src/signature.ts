import { sign, verify, type KeyObject } from 'node:crypto';
import { ProtocolError } from './errors.js';
import { isLowerHex } from './hex.js';
import { isStrictPublicKey, publicKeyFromHex } from './keys.js';

/**
 * Pure Ed25519 (RFC 8032, not Ed25519ph) signature over `message`, as 128 lowercase hex
 * characters. Ed25519 is deterministic: the same key and message give the same signature.
 *
 * @example
 * const signature = signHex(requestMessage(request), nodeKey);
 */
export function signHex(message: Uint8Array, privateKey: KeyObject): string {
  if (privateKey.type !== 'private' || privateKey.asymmetricKeyType !== 'ed25519') {
    throw new ProtocolError('expected an Ed25519 private key', '/private_key');
  }
  return sign(null, message, privateKey).toString('hex');
}

/**
 * Verifies a pure Ed25519 signature. Strict and total: returns `false`, never throws, for any
 * malformed input (a signature that is not exactly 128 lowercase hex characters, a public key
 * that is not 64 lowercase hex characters, a key that is not a valid point, a non-canonical
 * encoding or a small-order point).
 *
 * @example
 * verifyHex(requestMessage(request), headers['x-svc-signature'], node.pubkey); // true | false
 */
export function verifyHex(message: Uint8Array, signatureHex: string, publicKey: string | KeyObject): boolean {
  try {
    if (!(message instanceof Uint8Array) || !isLowerHex(signatureHex, 64)) return false;
    let key: KeyObject;
    if (typeof publicKey === 'string') {
      if (!isLowerHex(publicKey, 32)) return false;
      key = publicKeyFromHex(publicKey);
    } else {
      key = publicKey;
      if (!isStrictPublicKey(key)) return false;
    }
    if (key.asymmetricKeyType !== 'ed25519') return false;
    return verify(null, message, key, Buffer.from(signatureHex, 'hex'));
  } catch {
    return false;
  }
}

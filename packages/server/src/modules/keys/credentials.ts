import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { randomToken } from '../../platform/ids.js';

/** API keys' form and stored digest (auth checks them, keys mints them). Pure: no IO. */

export const API_KEY_HASH_ALG = 'hmac-sha256-v1';
const KEY_PATTERN = /^svc_live_([a-z0-9]{20})_([0-9a-f]{64})$/;

export interface NewApiKey {
  keyId: string;
  prefix: string;
  /** The full key, shown to its owner once. */
  key: string;
}

/** Makes `svc_live_<key_id>_<secret>`: a 20-character base32 id and 256 random bits in hex. */
export function generateApiKey(): NewApiKey {
  const keyId = randomToken(20);
  const prefix = `svc_live_${keyId}`;
  return { keyId, prefix, key: `${prefix}_${randomBytes(32).toString('hex')}` };
}

/** The key id of a well-formed key, or undefined. */
export function parseApiKey(key: string): string | undefined {
  return KEY_PATTERN.exec(key)?.[1];
}

/** The stored form of a key: hex HMAC-SHA256 under the platform pepper. */
export function hashApiKey(key: string, pepper: Buffer): string {
  return createHmac('sha256', pepper).update(key).digest('hex');
}

/** Constant-time comparison of two hex digests of equal length. */
export function sameDigest(a: string, b: string): boolean {
  const x = Buffer.from(a, 'hex');
  const y = Buffer.from(b, 'hex');
  return x.length === y.length && x.length > 0 && timingSafeEqual(x, y);
}

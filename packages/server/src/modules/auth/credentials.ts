import { createHmac, randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';
import { randomToken } from '../../platform/ids.js';

const SCRYPT = { N: 16_384, r: 8, p: 1, keylen: 32, maxmem: 64 * 1024 * 1024 };

function scryptAsync(password: string, salt: Buffer, keylen: number, options: ScryptOptions): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    scrypt(password, salt, keylen, options, (err, key) => (err ? reject(err) : resolve(key))),
  );
}

/**
 * Hashes a password with scrypt and a fresh 16-byte salt: `scrypt$N$r$p$<salt b64>$<hash b64>`.
 *
 * @example
 * const stored = await hashPassword('correct horse battery');
 */
export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const hash = await scryptAsync(password.normalize('NFKC'), salt, SCRYPT.keylen, SCRYPT);
  return ['scrypt', SCRYPT.N, SCRYPT.r, SCRYPT.p, salt.toString('base64'), hash.toString('base64')].join('$');
}

/** Checks a password against a stored hash in constant time. A malformed hash never matches. */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [alg, n, r, p, saltB64, hashB64] = stored.split('$');
  if (alg !== 'scrypt' || !saltB64 || !hashB64) return false;
  const expected = Buffer.from(hashB64, 'base64');
  const actual = await scryptAsync(password.normalize('NFKC'), Buffer.from(saltB64, 'base64'), expected.length, {
    N: Number(n),
    r: Number(r),
    p: Number(p),
    maxmem: SCRYPT.maxmem,
  });
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}

/** A hash of a password nobody has, so that a login for an unknown email costs the same time. */
export const DUMMY_PASSWORD_HASH =
  'scrypt$16384$8$1$AAAAAAAAAAAAAAAAAAAAAA==$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=';

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

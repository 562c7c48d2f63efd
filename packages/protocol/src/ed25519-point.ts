/**
 * Strict Ed25519 public-key check (RFC 8032 section 5.1.3 decoding, plus a small-order test),
 * in plain BigInt arithmetic so the in-browser verifier can use it too.
 *
 * Ed25519 verification libraries accept keys that are not safe to trust: a small-order point
 * (one of the 8 torsion points, e.g. the identity 0100..00) makes signatures under it forgeable
 * by anyone, and non-canonical encodings let one key have several spellings. Every public key
 * the platform or an auditor trusts passes {@link ed25519PublicKeyProblem} first.
 */

const P = 2n ** 255n - 19n;
/** d = -121665 / 121666 mod p. */
const D = 37095705934669439343138083508754565189542113879843219016388785533085940283555n;
/** A square root of -1 mod p. */
const SQRT_M1 = 19681161376707505956807079304988542015446066515923890162744021073123829784752n;

const mod = (a: bigint): bigint => {
  const r = a % P;
  return r >= 0n ? r : r + P;
};

function pow(base: bigint, exponent: bigint): bigint {
  let result = 1n;
  let b = mod(base);
  for (let e = exponent; e > 0n; e >>= 1n) {
    if (e & 1n) result = (result * b) % P;
    b = (b * b) % P;
  }
  return result;
}

/** Point doubling in extended coordinates for a = -1 (dbl-2008-hwcd); T is not needed to double. */
function double([x, y, z]: [bigint, bigint, bigint]): [bigint, bigint, bigint] {
  const a = (x * x) % P;
  const b = (y * y) % P;
  const c = (2n * z * z) % P;
  const d = mod(-a);
  const e = mod((x + y) * (x + y) - a - b);
  const g = mod(d + b);
  const f = mod(g - c);
  const h = mod(d - b);
  return [(e * f) % P, (g * h) % P, (f * g) % P];
}

/**
 * Why a raw 32-byte Ed25519 public key must not be trusted, or undefined when it is a canonical
 * encoding of a point of large order.
 *
 * @example
 * ed25519PublicKeyProblem(hexBytes('01' + '00'.repeat(31))); // 'is a small-order point (order 1) ...'
 */
export function ed25519PublicKeyProblem(raw: Uint8Array): string | undefined {
  if (raw.length !== 32) return 'is not 32 bytes';
  let y = 0n;
  for (let i = 31; i >= 0; i--) y = (y << 8n) | BigInt(i === 31 ? (raw[i] ?? 0) & 0x7f : (raw[i] ?? 0));
  const sign = ((raw[31] ?? 0) >> 7) & 1;
  if (y >= P) return 'is a non-canonical encoding (y is not reduced mod p)';
  // x^2 = (y^2 - 1) / (d y^2 + 1); candidate root x = u v^3 (u v^7)^((p-5)/8).
  const y2 = (y * y) % P;
  const u = mod(y2 - 1n);
  const v = mod(D * y2 + 1n);
  const v3 = (v * v * v) % P;
  let x = (u * v3 * pow(u * v3 * v3 * v, (P - 5n) / 8n)) % P;
  const vx2 = (v * x * x) % P;
  if (vx2 === mod(-u)) x = (x * SQRT_M1) % P;
  else if (vx2 !== u) return 'is not a point on the Ed25519 curve';
  if (x === 0n && sign === 1) return 'is a non-canonical encoding (x = 0 with the sign bit set)';
  if (Number(x & 1n) !== sign) x = P - x;
  // [8]P is the identity exactly for the 8 torsion points.
  let point: [bigint, bigint, bigint] = [x, y, 1n];
  for (let order = 1; order <= 8; order *= 2) {
    if (point[0] === 0n && point[1] === point[2])
      return `is a small-order point (order ${order}): signatures under it can be forged`;
    point = double(point);
  }
  return undefined;
}

/** {@link ed25519PublicKeyProblem} for a 64-character hex key; malformed hex is a problem too. */
export function ed25519PublicKeyHexProblem(hex: string): string | undefined {
  if (typeof hex !== 'string' || !/^[0-9a-fA-F]{64}$/.test(hex)) return 'is not 64 hex characters';
  const raw = new Uint8Array(32);
  for (let i = 0; i < 32; i++) raw[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return ed25519PublicKeyProblem(raw);
}

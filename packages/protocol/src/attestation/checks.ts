import { createHash, webcrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';
import { assertWellFormed, children, decodeOid, readTlv } from './der.js';

/** One named step of a verification, printed one per line by `svc attest verify`. */
export interface AttestationCheck {
  name: string;
  ok: boolean;
  detail: string;
}

/** Collects checks in order; `ok` is true only when every check ran and passed. */
export class CheckList {
  readonly checks: AttestationCheck[] = [];

  add(name: string, ok: boolean, detail: string): boolean {
    this.checks.push({ name, ok, detail });
    return ok;
  }

  get ok(): boolean {
    return this.checks.length > 0 && this.checks.every((c) => c.ok);
  }
}

export function toHex(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex');
}

export function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * Parses one DER certificate strictly: one SEQUENCE spanning exactly the input, which the parsed
 * is well formed all the way down, with the same signature algorithm inside and outside the TBS
 * (the ASN.1 parser alone forgives some malformed lengths, and signature checks skip the outer one).
 */
export function parseDerCertificate(der: Uint8Array): x509.X509Certificate {
  return cached(parsedCache, digest(der), () => {
    assertStrictSigned(der, 'certificate');
    return new x509.X509Certificate(Buffer.from(der));
  });
}

/** Parses a DER CRL with the same strictness as {@link parseDerCertificate}. */
export function parseDerCrl(der: Uint8Array): x509.X509Crl {
  return cached(parsedCache, digest(der), () => {
    assertStrictSigned(der, 'CRL');
    return new x509.X509Crl(Buffer.from(der));
  });
}

/**
 * Deliberate caches, keyed by the SHA-256 of the exact bytes: the ASN.1 parser costs milliseconds
 * per certificate and nodes re-attest with the same chains. Bounded; the least recently used go first.
 */
const CACHE_LIMIT = 256;
const parsedCache = new Map<string, x509.X509Certificate | x509.X509Crl>();
const signatureCache = new Map<string, boolean>();

function cached<V, T extends V>(cache: Map<string, V>, key: string, make: () => T): T {
  const hit = cache.get(key);
  if (hit !== undefined) {
    // Least recently used goes first: a stream of new chains must not push out the one in use.
    cache.delete(key);
    cache.set(key, hit);
    return hit as T;
  }
  const value = make();
  if (cache.size >= CACHE_LIMIT) cache.delete(cache.keys().next().value as string);
  cache.set(key, value);
  return value;
}

/**
 * Whether `verify` accepts `signature` over `data` under the public key whose encoding is `key`
 * (with `algorithm`, e.g. 'ecdsa-p256-sha256'), remembered by the SHA-256 of the four (each length-prefixed): the same bytes always get the
 * same answer, so a re-attestation or a second report signed by the same key skips the key import
 * and the ECDSA verification. `verify` runs only on a miss.
 */
export function signatureVerifies(
  algorithm: string,
  key: Uint8Array,
  data: Uint8Array,
  signature: Uint8Array,
  verify: () => boolean,
) {
  const hash = createHash('sha256').update(`${algorithm}\n`);
  for (const part of [key, data, signature]) {
    const length = Buffer.alloc(4);
    length.writeUInt32BE(part.byteLength);
    hash.update(length).update(part);
  }
  return cached(signatureCache, `sig:${hash.digest('hex')}`, verify);
}

function digest(data: Uint8Array | ArrayBuffer): string {
  return createHash('sha256')
    .update(data instanceof ArrayBuffer ? Buffer.from(data) : data)
    .digest('hex');
}

function assertStrictSigned(der: Uint8Array, what: string): void {
  const outer = readTlv(der);
  if (outer.tag !== 0x30 || outer.end !== der.length)
    throw new Error(`the ${what} is not one DER SEQUENCE spanning the input`);
  assertWellFormed(outer.value);
  const [tbs, algorithm, signature, ...extra] = children(outer.value);
  if (!signature || signature.tag !== 0x03 || signature.value[0] !== 0 || extra.length > 0)
    throw new Error(`the ${what}'s signature is not one whole-byte BIT STRING`);
  const innerAlgorithm =
    tbs && children(tbs.value).find((c, i, all) => c.tag === 0x30 && i > 0 && all[i - 1]?.tag === 0x02);
  if (
    !algorithm ||
    !innerAlgorithm ||
    Buffer.compare(Buffer.from(algorithm.value), Buffer.from(innerAlgorithm.value)) !== 0
  ) {
    throw new Error(`the ${what}'s signature algorithm differs from its TBS's`);
  }
  const [oid] = children(algorithm.value);
  if (oid?.tag === 0x06 && decodeOid(oid.value).startsWith('1.2.840.10045.4.'))
    assertEcdsaSignature(signature.value.subarray(1), what);
}

/** An ECDSA-Sig-Value in strict DER: two minimal positive INTEGERs (verifiers forgive padding). */
function assertEcdsaSignature(sig: Uint8Array, what: string): void {
  const seq = readTlv(sig);
  const parts = seq.tag === 0x30 && seq.end === sig.length ? children(seq.value) : [];
  const minimal = (v: Uint8Array) =>
    v.length > 0 && (v[0] as number) < 0x80 && !(v[0] === 0 && (v.length === 1 || (v[1] as number) < 0x80));
  if (parts.length !== 2 || !parts.every((p) => p.tag === 0x02 && minimal(p.value)))
    throw new Error(`the ${what}'s ECDSA signature is not strict DER`);
}

/** Parses one certificate given as DER bytes or PEM text. */
export function parseCertificate(input: Uint8Array | string): x509.X509Certificate {
  const text = typeof input === 'string' ? input : Buffer.from(input).toString('latin1');
  if (text.includes('-----BEGIN CERTIFICATE-----')) {
    const [cert, ...rest] = parsePemChain(text);
    if (!cert || rest.length > 0) throw new Error('expected exactly one certificate');
    return cert;
  }
  return parseDerCertificate(typeof input === 'string' ? Buffer.from(input, 'latin1') : input);
}

/** Every certificate of a PEM bundle, in order. */
export function parsePemChain(pem: string): x509.X509Certificate[] {
  const blocks = [...pem.matchAll(/-----BEGIN CERTIFICATE-----([^-]*)-----END CERTIFICATE-----/g)].map((m) =>
    (m[1] ?? '').replace(/\s+/g, ''),
  );
  if (blocks.length === 0) throw new Error('no PEM certificate');
  return blocks.map((body) => {
    const der = Buffer.from(body, 'base64');
    // Base64 tolerates junk and non-zero padding bits: only the canonical encoding of the DER is accepted.
    if (der.toString('base64') !== body) throw new Error('a PEM block is not canonical base64');
    return parseDerCertificate(der);
  });
}

/** SHA-256 of the DER, lowercase hex: the fingerprint roots are pinned by. */
export function fingerprint(cert: x509.X509Certificate): string {
  return createHash('sha256').update(Buffer.from(cert.rawData)).digest('hex');
}

/** True when `child`'s signature verifies under `issuer`'s key (signature only: dates are their own check). */
export async function signedBy(
  child: x509.X509Certificate | x509.X509Crl,
  issuer: x509.X509Certificate,
): Promise<boolean> {
  const key = `${digest(child.rawData)}:${digest(issuer.rawData)}`;
  const hit = signatureCache.get(key);
  if (hit !== undefined) return hit;
  const ok = await verifiedBy(child, issuer);
  cached(signatureCache, key, () => ok);
  return ok;
}

async function verifiedBy(child: x509.X509Certificate | x509.X509Crl, issuer: x509.X509Certificate): Promise<boolean> {
  const crypto = webcrypto as unknown as Parameters<x509.X509Certificate['verify']>[1];
  try {
    return child instanceof x509.X509Crl
      ? await child.verify({ publicKey: issuer }, crypto)
      : await child.verify({ publicKey: issuer, signatureOnly: true }, crypto);
  } catch {
    return false;
  }
}

export function validAt(cert: x509.X509Certificate, now: Date): boolean {
  return cert.notBefore.getTime() <= now.getTime() && now.getTime() <= cert.notAfter.getTime();
}

export function commonName(name: string): string {
  return /(?:^|,\s*)CN=([^,]+)/.exec(name)?.[1] ?? name;
}

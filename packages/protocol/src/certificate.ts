import type { KeyObject } from 'node:crypto';
import { ProtocolError } from './errors.js';
import { EVIDENCE_CERT_VERSION } from './evidence.js';
import { hexToBytes } from './hex.js';
import { canonicalSha256Hex } from './keys.js';
import { signHex, verifyHex } from './signature.js';

/** What an evidence certificate signs. */
export interface CertificateFields {
  run_id: string;
  event_count: number;
  root_hash_hex: string;
}

/**
 * UTF-8 of `"SVC2-draft\n" + run_id + "\n" + event_count + "\n" + root_hash_hex + "\n"`.
 *
 * @example
 * certificateMessage({ run_id: run.id, event_count: events.length, root_hash_hex: run.root_hash });
 */
export function certificateMessage(fields: CertificateFields): Buffer {
  const { run_id, event_count, root_hash_hex } = fields;
  if (typeof run_id !== 'string' || run_id === '' || run_id.includes('\n')) {
    throw new ProtocolError('run_id must be a non-empty string without newlines', '/run_id');
  }
  if (!Number.isSafeInteger(event_count) || event_count < 0) {
    throw new ProtocolError('event_count must be a non-negative integer', '/event_count');
  }
  hexToBytes(root_hash_hex, 32, '/root_hash');
  return Buffer.from(`${EVIDENCE_CERT_VERSION}\n${run_id}\n${event_count}\n${root_hash_hex}\n`, 'utf8');
}

/**
 * The platform's certificate signature (`signature_hex`): pure Ed25519 over
 * {@link certificateMessage}.
 *
 * @example
 * const signature_hex = signCertificate(fields, platformKey);
 */
export function signCertificate(fields: CertificateFields, privateKey: KeyObject): string {
  return signHex(certificateMessage(fields), privateKey);
}

/**
 * Verifies a certificate signature. Total: `false`, never throws, on malformed input.
 *
 * @example
 * verifyCertificate(fields, cert.signature_hex, cert.signer_public_key_hex); // true | false
 */
export function verifyCertificate(fields: CertificateFields, signature_hex: string, publicKeyHex: string): boolean {
  try {
    return verifyHex(certificateMessage(fields), signature_hex, publicKeyHex);
  } catch {
    return false;
  }
}

/**
 * `bundle_hash` = hex SHA-256 of JCS(bundle without `bundle_hash`); a `bundle_hash` property
 * on the argument is ignored, so a received bundle can be passed as is.
 *
 * @example
 * bundleHash(bundle) === bundle.bundle_hash; // the bundle is intact
 */
export function bundleHash(bundle: Readonly<Record<string, unknown>>): string {
  const rest: Record<string, unknown> = { ...bundle };
  delete rest.bundle_hash;
  return canonicalSha256Hex(rest);
}

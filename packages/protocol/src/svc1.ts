import type { KeyObject } from 'node:crypto';
import { ProtocolError } from './errors.js';
import { hexToBytes } from './hex.js';
import { publicKeyHex } from './keys.js';
import { signHex, verifyHex } from './signature.js';

/** The signature version of node receipts. */
export const RECEIPT_SIGNATURE_VERSION = 'SVC1';
/** What a receipt's `job_id` must match: ASCII, 1 to 256 characters. */
export const SVC1_JOB_ID_PATTERN = /^[A-Za-z0-9._:-]{1,256}$/;

const MAGIC = Buffer.from('SVC1\u0000', 'latin1');
const FIXED_LENGTH = MAGIC.length + 2 + 32 + 32 + 8;

/** Exactly the fields an SVC1 signature covers. Hex fields are lowercase, 32 bytes each. */
export interface Svc1Fields {
  job_id: string;
  node_public_key_hex: string;
  result_hash_hex: string;
  metering_units: number;
}

/**
 * The bytes an SVC1 signature covers:
 * `"SVC1" 0x00 || u16be(len(job_id)) || job_id || node_public_key (32) || result_hash (32) ||
 * u64be(metering_units)`. Throws {@link ProtocolError} on any malformed field.
 *
 * @example
 * const bytes = svc1Message({
 *   job_id: 'job_01JD0000000000000000000000',
 *   node_public_key_hex: node.pubkey,
 *   result_hash_hex: sha256Hex(result),
 *   metering_units: 1234,
 * });
 */
export function svc1Message(fields: Svc1Fields): Buffer {
  const { job_id, metering_units } = fields;
  if (typeof job_id !== 'string' || !SVC1_JOB_ID_PATTERN.test(job_id)) {
    throw new ProtocolError('job_id must match [A-Za-z0-9._:-]{1,256}', '/job_id');
  }
  const publicKey = hexToBytes(fields.node_public_key_hex, 32, '/node_public_key');
  const resultHash = hexToBytes(fields.result_hash_hex, 32, '/result_hash');
  if (!Number.isSafeInteger(metering_units) || metering_units < 0) {
    throw new ProtocolError('metering_units must be an integer from 0 to 2^53-1', '/metering_units');
  }
  const length = Buffer.alloc(2);
  length.writeUInt16BE(job_id.length);
  const units = Buffer.alloc(8);
  units.writeBigUInt64BE(BigInt(metering_units));
  return Buffer.concat([MAGIC, length, Buffer.from(job_id, 'ascii'), publicKey, resultHash, units]);
}

/**
 * Decodes SVC1 message bytes back into their fields; the inverse of {@link svc1Message}.
 * Throws {@link ProtocolError} unless the bytes are exactly a well-formed SVC1 message.
 *
 * @example
 * decodeSvc1Message(svc1Message(fields)); // deep-equals fields
 */
export function decodeSvc1Message(bytes: Uint8Array): Svc1Fields {
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (buf.length < FIXED_LENGTH || !buf.subarray(0, MAGIC.length).equals(MAGIC)) {
    throw new ProtocolError('not an SVC1 message', '');
  }
  const idLength = buf.readUInt16BE(MAGIC.length);
  if (buf.length !== FIXED_LENGTH + idLength) throw new ProtocolError('SVC1 message has the wrong length', '');
  const idEnd = MAGIC.length + 2 + idLength;
  const units = buf.readBigUInt64BE(idEnd + 64);
  if (units > BigInt(Number.MAX_SAFE_INTEGER)) {
    throw new ProtocolError('metering_units must be an integer from 0 to 2^53-1', '/metering_units');
  }
  const fields: Svc1Fields = {
    job_id: buf.subarray(MAGIC.length + 2, idEnd).toString('latin1'),
    node_public_key_hex: buf.subarray(idEnd, idEnd + 32).toString('hex'),
    result_hash_hex: buf.subarray(idEnd + 32, idEnd + 64).toString('hex'),
    metering_units: Number(units),
  };
  svc1Message(fields); // validates job_id
  return fields;
}

/**
 * Signs a receipt as the node: pure Ed25519 over {@link svc1Message}, 128 lowercase hex
 * characters. Refuses a key whose public half is not `node_public_key_hex`, since that
 * receipt could never verify.
 *
 * @example
 * const signature = signSvc1(fields, nodePrivateKey);
 */
export function signSvc1(fields: Svc1Fields, privateKey: KeyObject): string {
  const message = svc1Message(fields);
  if (publicKeyHex(privateKey) !== fields.node_public_key_hex) {
    throw new ProtocolError('private key does not match node_public_key', '/node_public_key');
  }
  return signHex(message, privateKey);
}

/**
 * Verifies an SVC1 signature against the `node_public_key_hex` inside the fields. Strict and
 * total: `false`, never an exception, for malformed fields or a signature that is not exactly
 * 128 lowercase hex characters.
 *
 * @example
 * verifySvc1(
 *   { job_id, node_public_key_hex: r.node_public_key, result_hash_hex: r.result_hash, metering_units },
 *   r.signature,
 * ); // true | false
 */
export function verifySvc1(fields: Svc1Fields, signature_hex: string): boolean {
  try {
    return verifyHex(svc1Message(fields), signature_hex, fields.node_public_key_hex);
  } catch {
    return false;
  }
}

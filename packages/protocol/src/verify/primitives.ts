import { ed25519PublicKeyHexProblem } from '../ed25519-point.js';

// The verifier's primitives on WebCrypto only (`globalThis.crypto.subtle`), so the same code runs
// in Node.js (`svc verify`) and in a browser (the dashboard). The Node-side signers in this
// package build the same bytes; tests check both against the published vectors.

const encoder = new TextEncoder();
const LOWER_HEX = /^(?:[0-9a-f]{2})*$/;

export function utf8(text: string): Uint8Array {
  return encoder.encode(text);
}

export function isHex(value: unknown, byteLength?: number): value is string {
  return (
    typeof value === 'string' && LOWER_HEX.test(value) && (byteLength === undefined || value.length === byteLength * 2)
  );
}

export function fromHex(hex: string): Uint8Array {
  const out = new Uint8Array(hex.length / 2);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.slice(i * 2, i * 2 + 2), 16);
  return out;
}

export function toHex(bytes: Uint8Array): string {
  let out = '';
  for (const b of bytes) out += b.toString(16).padStart(2, '0');
  return out;
}

export function concat(...parts: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

// WebCrypto's typings want ArrayBuffer-backed views; copy into one (inputs are small).
function buffer(bytes: Uint8Array): ArrayBuffer {
  const copy = new ArrayBuffer(bytes.byteLength);
  new Uint8Array(copy).set(bytes);
  return copy;
}

export async function sha256(bytes: Uint8Array): Promise<Uint8Array> {
  return new Uint8Array(await globalThis.crypto.subtle.digest('SHA-256', buffer(bytes)));
}

export async function sha256Hex(bytes: Uint8Array): Promise<string> {
  return toHex(await sha256(bytes));
}

/** Pure Ed25519 verification; false (never a throw) on a malformed key or signature. */
export async function verifyEd25519(publicKeyHex: string, message: Uint8Array, signatureHex: string): Promise<boolean> {
  if (!isHex(publicKeyHex, 32) || !isHex(signatureHex, 64)) return false;
  // WebCrypto accepts small-order and non-canonical keys, under which signatures can be forged.
  if (ed25519PublicKeyHexProblem(publicKeyHex) !== undefined) return false;
  try {
    const key = await globalThis.crypto.subtle.importKey(
      'raw',
      buffer(fromHex(publicKeyHex)),
      { name: 'Ed25519' },
      false,
      ['verify'],
    );
    return await globalThis.crypto.subtle.verify(
      { name: 'Ed25519' },
      key,
      buffer(fromHex(signatureHex)),
      buffer(message),
    );
  } catch {
    return false;
  }
}

/** RFC 6962 Merkle tree hash over hex leaf hashes (already 0x00-prefixed event hashes). */
export async function merkleRootHex(leaves: readonly string[]): Promise<string> {
  if (leaves.length === 0) return sha256Hex(new Uint8Array(0));
  const node = async (start: number, end: number): Promise<Uint8Array> => {
    if (end - start === 1) return fromHex(leaves[start] ?? '');
    let k = 1;
    while (k * 2 < end - start) k *= 2;
    const [left, right] = await Promise.all([node(start, start + k), node(start + k, end)]);
    return sha256(concat(Uint8Array.of(1), left, right));
  };
  return toHex(await node(0, leaves.length));
}

/** The SVC1 message bytes (docs/receipts.md); undefined when a field cannot be encoded. */
export function svc1MessageBytes(fields: {
  job_id: unknown;
  node_public_key_hex: unknown;
  result_hash_hex: unknown;
  metering_units: unknown;
}): Uint8Array | undefined {
  const { job_id, node_public_key_hex, result_hash_hex, metering_units } = fields;
  if (typeof job_id !== 'string' || !/^[A-Za-z0-9._:-]{1,256}$/.test(job_id)) return undefined;
  if (!isHex(node_public_key_hex, 32) || !isHex(result_hash_hex, 32)) return undefined;
  if (typeof metering_units !== 'number' || !Number.isSafeInteger(metering_units) || metering_units < 0)
    return undefined;
  const head = new Uint8Array(7);
  head.set(utf8('SVC1\u0000'));
  new DataView(head.buffer).setUint16(5, job_id.length);
  const units = new Uint8Array(8);
  new DataView(units.buffer).setBigUint64(0, BigInt(metering_units));
  return concat(head, utf8(job_id), fromHex(node_public_key_hex), fromHex(result_hash_hex), units);
}

/** The evidence certificate message (DESIGN.md section 11). */
export function certificateMessageBytes(runId: string, eventCount: number, rootHashHex: string): Uint8Array {
  return utf8(`SVC2-draft\n${runId}\n${eventCount}\n${rootHashHex}\n`);
}

import type { KeyObject } from 'node:crypto';
import { ProtocolError } from './errors.js';
import { hexToBytes } from './hex.js';
import { publicKeyHex } from './keys.js';
import { sha256BytesOf } from './sha256.js';
import { signHex } from './signature.js';

// The log's checkpoints as C2SP signed notes (the format of Go's golang.org/x/mod/sumdb/note):
// the text `<origin>\n<tree size>\n<base64 root>\n`, a blank line, then one line per signature,
// `— <key name> <base64(4-byte key hash || Ed25519 signature over the text)>`. The key name is
// the log's origin; the key hash is the first four bytes of SHA-256(name "\n" 0x01 public key),
// so a rotated key signs under the same name with another hash (DESIGN.md section 17).

const ALG_ED25519 = 0x01;

/** Whether `name` can name a note key: not empty, no white space, no `+` (note's isValidName). */
export function isNoteKeyName(name: string): boolean {
  return name.length > 0 && !/[\s+]/u.test(name);
}

function assertName(name: string): void {
  if (!isNoteKeyName(name)) throw new ProtocolError('a note key name must be non-empty, without spaces or "+"');
}

/** The 4-byte key hash of an Ed25519 note key, big-endian. */
export function noteKeyHash(name: string, publicKey: string): Buffer {
  const key = Buffer.concat([Buffer.from([ALG_ED25519]), hexToBytes(publicKey, 32, '/public_key')]);
  return sha256BytesOf(Buffer.concat([Buffer.from(`${name}\n`, 'utf8'), key])).subarray(0, 4);
}

/**
 * The note verifier key of an Ed25519 public key: `<name>+<8 hex key hash>+<base64(0x01 || key)>`
 * (note.NewEd25519VerifierKey).
 *
 * @example
 * noteVerifierKey('svc.example/log', platformPublicKeyHex);
 */
export function noteVerifierKey(name: string, publicKey: string): string {
  assertName(name);
  const key = Buffer.concat([Buffer.from([ALG_ED25519]), hexToBytes(publicKey, 32, '/public_key')]);
  return `${name}+${noteKeyHash(name, publicKey).toString('hex')}+${key.toString('base64')}`;
}

/**
 * A checkpoint's text (C2SP tlog-checkpoint): origin, tree size, base64 root hash, one a line.
 *
 * @example
 * checkpointText('svc.example/log', 12, root); // 'svc.example/log\n12\n<base64>\n'
 */
export function checkpointText(origin: string, size: number, root: Uint8Array): string {
  assertName(origin);
  if (!Number.isSafeInteger(size) || size < 0) throw new ProtocolError('tree size must be a non-negative integer');
  if (root.length !== 32) throw new ProtocolError('a root hash has 32 bytes');
  return `${origin}\n${size}\n${Buffer.from(root).toString('base64')}\n`;
}

/**
 * Signs a note's text with an Ed25519 key under `name` (note.Sign with one signer).
 *
 * @example
 * const note = signNote(checkpointText(origin, size, root), origin, platformKey);
 */
export function signNote(text: string, name: string, privateKey: KeyObject): string {
  assertName(name);
  if (!text.endsWith('\n')) throw new ProtocolError('a note text ends with a newline');
  const signature = Buffer.from(signHex(Buffer.from(text, 'utf8'), privateKey), 'hex');
  const hash = noteKeyHash(name, publicKeyHex(privateKey));
  return `${text}\n— ${name} ${Buffer.concat([hash, signature]).toString('base64')}\n`;
}

import { concat, fromHex, sha256, toHex, utf8, verifyEd25519 } from './primitives.js';

// The checking side of the transparency log (DESIGN.md section 17), on WebCrypto only so that
// `svc verify`, `svc log watch` and the dashboard's in-browser verifier share it: note verifier
// keys, signed checkpoints, and RFC 6962 inclusion and consistency proofs as Go's sumdb/tlog
// checks them (CheckRecord, CheckTree). Every function is total: a malformed input is a
// `problem`, never a throw.

/** A parsed note verifier key (`<name>+<hex key hash>+<base64(0x01 || Ed25519 key)>`). */
export interface NoteVerifierKey {
  name: string;
  key_hash_hex: string;
  public_key_hex: string;
}

/** A checkpoint's parsed text. */
export interface Checkpoint {
  origin: string;
  tree_size: number;
  root_hash_b64: string;
}

export function fromBase64(text: string): Uint8Array | undefined {
  if (!/^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/.test(text)) return undefined;
  const binary = atob(text);
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
  return out;
}

export function toBase64(bytes: Uint8Array): string {
  let binary = '';
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary);
}

const validName = (name: string) => name.length > 0 && !/[\s+]/u.test(name);

async function keyHashHex(name: string, key: Uint8Array): Promise<string> {
  return toHex((await sha256(concat(utf8(`${name}\n`), key))).subarray(0, 4));
}

/**
 * Parses and checks a note verifier key (its key hash must match its name and key).
 *
 * @example
 * await parseNoteVerifierKey(keys.log_verifier_key); // { name, key_hash_hex, public_key_hex }
 */
export async function parseNoteVerifierKey(vkey: string): Promise<NoteVerifierKey | { problem: string }> {
  // Split at the first two '+' only (note.NewVerifier's chop): standard base64 may hold '+' too.
  const [name = '', hash = ''] = vkey.split('+', 2);
  const key = fromBase64(vkey.slice(name.length + hash.length + 2));
  if (!validName(name) || !/^[0-9a-f]{8}$/.test(hash) || !key)
    return { problem: 'not a note verifier key (<name>+<8 hex>+<base64 key>)' };
  if (key.length !== 33 || key[0] !== 0x01) return { problem: 'not an Ed25519 note verifier key' };
  if ((await keyHashHex(name, key)) !== hash) return { problem: 'the key hash does not match the name and key' };
  return { name, key_hash_hex: hash, public_key_hex: toHex(key.subarray(1)) };
}

/**
 * The note verifier key of the Ed25519 public key `publicKeyHex` under `name`, as
 * `noteVerifierKey` builds it on the server; undefined for an invalid name or key.
 *
 * @example
 * await noteVerifierKeyOf(checkpoint.origin, pinnedPlatformKeyHex);
 */
export async function noteVerifierKeyOf(name: string, publicKeyHex: string): Promise<NoteVerifierKey | undefined> {
  if (!validName(name) || !/^[0-9a-f]{64}$/.test(publicKeyHex)) return undefined;
  const key = concat(Uint8Array.of(0x01), fromHex(publicKeyHex));
  return { name, key_hash_hex: await keyHashHex(name, key), public_key_hex: publicKeyHex };
}

/**
 * Opens a signed note: checks every signature line by a known key and returns the text and the
 * keys that signed it. A note signed by no known key is a problem (note.Open's
 * UnverifiedNoteError), and so is a line by a known key whose signature does not verify.
 *
 * @example
 * const opened = await openNote(await (await fetch(`${base}/api/v1/log/checkpoint`)).text(), [key]);
 */
export async function openNote(
  note: string,
  known: readonly NoteVerifierKey[],
): Promise<{ text: string; signed_by: NoteVerifierKey[] } | { problem: string }> {
  for (const ch of note) {
    const code = ch.codePointAt(0) ?? 0;
    if (code < 0x20 && ch !== '\n') return { problem: 'a note holds no control characters' };
  }
  const split = note.lastIndexOf('\n\n');
  if (split < 0) return { problem: 'a note is its text, a blank line and its signatures' };
  const text = note.slice(0, split + 1);
  const sigs = note.slice(split + 2);
  if (!sigs.endsWith('\n')) return { problem: 'a note ends with a newline' };
  const signedBy: NoteVerifierKey[] = [];
  for (const line of sigs.slice(0, -1).split('\n')) {
    const match = /^— (\S+) (\S+)$/u.exec(line);
    const raw = match ? fromBase64(match[2] ?? '') : undefined;
    if (!match || !raw || raw.length < 5 || !validName(match[1] ?? ''))
      return { problem: `malformed signature line: ${line}` };
    const hash = toHex(raw.subarray(0, 4));
    const key = known.find((k) => k.name === match[1] && k.key_hash_hex === hash);
    if (!key || signedBy.includes(key)) continue;
    if (!(await verifyEd25519(key.public_key_hex, utf8(text), toHex(raw.subarray(4)))))
      return { problem: `the signature by ${key.name}+${hash} does not verify` };
    signedBy.push(key);
  }
  if (signedBy.length === 0) return { problem: 'no signature by a known key' };
  return { text, signed_by: signedBy };
}

/**
 * Parses a checkpoint's text: origin, decimal tree size, base64 root (extension lines allowed).
 *
 * @example
 * parseCheckpoint('svc.example/log\n3\n<base64>\n'); // { origin, tree_size: 3, root_hash_b64 }
 */
export function parseCheckpoint(text: string): Checkpoint | { problem: string } {
  const lines = text.split('\n');
  const [origin = '', size = '', root = ''] = lines;
  const rootBytes = fromBase64(root);
  if (!validName(origin) || !/^(0|[1-9]\d{0,15})$/.test(size) || !rootBytes || rootBytes.length !== 32)
    return { problem: 'not a checkpoint (origin, tree size, base64 root hash)' };
  const treeSize = Number(size);
  if (!Number.isSafeInteger(treeSize)) return { problem: 'tree size out of range' };
  return { origin, tree_size: treeSize, root_hash_b64: root };
}

async function nodeHash(left: Uint8Array, right: Uint8Array): Promise<Uint8Array> {
  return sha256(concat(Uint8Array.of(1), left, right));
}

function maxPow2(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

function hashes(proof: readonly string[]): Uint8Array[] | undefined {
  const out: Uint8Array[] = [];
  for (const h of proof) {
    const bytes = typeof h === 'string' ? fromBase64(h) : undefined;
    if (!bytes || bytes.length !== 32) return undefined;
    out.push(bytes);
  }
  return out;
}

async function runRecordProof(
  p: Uint8Array[],
  lo: number,
  hi: number,
  n: number,
  leaf: Uint8Array,
): Promise<Uint8Array | undefined> {
  if (lo + 1 === hi) return p.length === 0 ? leaf : undefined;
  const last = p[p.length - 1];
  if (!last) return undefined;
  const k = maxPow2(hi - lo);
  if (n < lo + k) {
    const th = await runRecordProof(p.slice(0, -1), lo, lo + k, n, leaf);
    return th && nodeHash(th, last);
  }
  const th = await runRecordProof(p.slice(0, -1), lo + k, hi, n, leaf);
  return th && nodeHash(last, th);
}

const equal = (a: Uint8Array, b: Uint8Array) => a.length === b.length && a.every((x, i) => x === b[i]);

/**
 * Whether `proof` (base64 hashes) proves that the record with leaf hash `leafHex` is number `n`
 * of the tree of `t` records whose root is `rootB64` (tlog.CheckRecord).
 *
 * @example
 * await checkInclusion(log.inclusion_proof, checkpoint.tree_size, checkpoint.root_hash_b64, log.leaf_index, leafHex);
 */
export async function checkInclusion(
  proof: readonly string[],
  t: number,
  rootB64: string,
  n: number,
  leafHex: string,
): Promise<boolean> {
  const p = Array.isArray(proof) ? hashes(proof) : undefined;
  const root = fromBase64(rootB64);
  if (!p || !root || !/^[0-9a-f]{64}$/.test(leafHex)) return false;
  if (!Number.isSafeInteger(t) || !Number.isSafeInteger(n) || n < 0 || n >= t) return false;
  const got = await runRecordProof(p, 0, t, n, fromHex(leafHex));
  return got !== undefined && equal(got, root);
}

async function runTreeProof(
  p: Uint8Array[],
  lo: number,
  hi: number,
  n: number,
  old: Uint8Array,
): Promise<[Uint8Array, Uint8Array] | undefined> {
  if (n === hi) {
    if (lo === 0) return p.length === 0 ? [old, old] : undefined;
    return p.length === 1 && p[0] ? [p[0], p[0]] : undefined;
  }
  const last = p[p.length - 1];
  if (!last) return undefined;
  const k = maxPow2(hi - lo);
  if (n <= lo + k) {
    const r = await runTreeProof(p.slice(0, -1), lo, lo + k, n, old);
    return r && [r[0], await nodeHash(r[1], last)];
  }
  const r = await runTreeProof(p.slice(0, -1), lo + k, hi, n, old);
  return r && [await nodeHash(last, r[0]), await nodeHash(last, r[1])];
}

/**
 * Whether `proof` (base64 hashes) proves that the tree of `n` records with root `oldB64` is a
 * prefix of the tree of `t` records with root `newB64` (tlog.CheckTree).
 *
 * @example
 * await checkConsistency(proof, next.tree_size, next.root_hash_b64, last.tree_size, last.root_hash_b64);
 */
export async function checkConsistency(
  proof: readonly string[],
  t: number,
  newB64: string,
  n: number,
  oldB64: string,
): Promise<boolean> {
  const p = Array.isArray(proof) ? hashes(proof) : undefined;
  const newRoot = fromBase64(newB64);
  const oldRoot = fromBase64(oldB64);
  if (!p || !newRoot || !oldRoot || newRoot.length !== 32 || oldRoot.length !== 32) return false;
  if (!Number.isSafeInteger(t) || !Number.isSafeInteger(n) || n < 1 || n > t) return false;
  const got = await runTreeProof(p, 0, t, n, oldRoot);
  return got !== undefined && equal(got[0], oldRoot) && equal(got[1], newRoot);
}

/** RFC 6962 leaf hash of a log entry's leaf data (UTF-8 JCS text), as hex. */
export async function logLeafHashHex(leafData: string): Promise<string> {
  return toHex(await sha256(concat(Uint8Array.of(0), utf8(leafData))));
}

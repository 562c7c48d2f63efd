import { ProtocolError } from './errors.js';
import { hexToBytes, isLowerHex } from './hex.js';
import { sha256BytesOf, sha256HexOf } from './sha256.js';

// RFC 6962 Merkle tree hash. Hex strings at the API, Buffers inside.

const LEAF_PREFIX = Buffer.from([0x00]);

/** MTH({}): SHA-256 of the empty string, the root of a tree with no leaves. */
export const MERKLE_EMPTY_ROOT = 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855';

/**
 * RFC 6962 interior node hash SHA-256(0x01 || left || right), the two 32-byte children written
 * into one buffer.
 *
 * @example
 * merkleNodeHash(leftChild, rightChild); // 32 bytes
 */
export function merkleNodeHash(left: Buffer, right: Buffer): Buffer {
  const input = Buffer.allocUnsafe(1 + left.length + right.length);
  input[0] = 0x01;
  left.copy(input, 1);
  right.copy(input, 1 + left.length);
  return sha256BytesOf(input);
}

/** Largest power of two strictly less than n (n >= 2). */
function splitPoint(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

function root(leaves: readonly Buffer[], start: number, end: number): Buffer {
  const n = end - start;
  if (n === 1) return leaves[start] ?? Buffer.alloc(0);
  const k = splitPoint(n);
  return merkleNodeHash(root(leaves, start, start + k), root(leaves, start + k, end));
}

function parseLeaves(leaves: readonly string[]): Buffer[] {
  return leaves.map((leaf, i) => hexToBytes(leaf, 32, `/leaves/${i}`));
}

/**
 * RFC 6962 leaf hash: hex SHA-256(0x00 || data). Strings are hashed as UTF-8.
 *
 * @example
 * leafHash('leaf-0'); // the first leaf of the Merkle test vectors in docs/evidence.md
 */
export function leafHash(data: Uint8Array | string): string {
  // A string is prefixed as a string: U+0000 is the single byte 0x00 in UTF-8.
  return sha256HexOf(typeof data === 'string' ? `\u0000${data}` : Buffer.concat([LEAF_PREFIX, data]));
}

/**
 * RFC 6962 Merkle tree hash over leaf hashes that are already domain-separated (event hashes):
 * interior node SHA-256(0x01 || left || right), split at the largest power of two below n, no
 * padding; one leaf is its own root; no leaves give {@link MERKLE_EMPTY_ROOT}.
 *
 * @example
 * merkleRoot(events.map((e) => e.event_hash)); // the run's root_hash
 */
export function merkleRoot(leaves: readonly string[]): string {
  if (leaves.length === 0) return MERKLE_EMPTY_ROOT;
  return root(parseLeaves(leaves), 0, leaves.length).toString('hex');
}

function path(leaves: readonly Buffer[], index: number, start: number, end: number): Buffer[] {
  const n = end - start;
  if (n === 1) return [];
  const k = splitPoint(n);
  if (index < k) return [...path(leaves, index, start, start + k), root(leaves, start + k, end)];
  return [...path(leaves, index - k, start + k, end), root(leaves, start, start + k)];
}

/**
 * RFC 6962 audit path of leaf `index`: the sibling hashes from the leaf up to the root.
 *
 * @example
 * const proof = inclusionProof(hashes, 2);
 * verifyInclusion(hashes[2], 2, hashes.length, proof, merkleRoot(hashes)); // true
 */
export function inclusionProof(leaves: readonly string[], index: number): string[] {
  if (!Number.isSafeInteger(index) || index < 0 || index >= leaves.length) {
    throw new ProtocolError(`index must be an integer from 0 to ${leaves.length - 1}`, '/index');
  }
  return path(parseLeaves(leaves), index, 0, leaves.length).map((h) => h.toString('hex'));
}

/**
 * Verifies an RFC 6962 audit path (the algorithm of RFC 9162, section 2.1.3.2). Total: returns
 * `false`, never throws, on malformed input.
 *
 * @example
 * verifyInclusion(eventHash, sequence - 1, eventCount, proof, run.root_hash); // true | false
 */
export function verifyInclusion(
  leaf: string,
  index: number,
  n: number,
  proof: readonly string[],
  rootHex: string,
): boolean {
  if (!isLowerHex(leaf, 32) || !isLowerHex(rootHex, 32) || !Array.isArray(proof)) return false;
  if (!Number.isSafeInteger(n) || !Number.isSafeInteger(index) || index < 0 || index >= n) return false;
  let fn = index;
  let sn = n - 1;
  let hash: Buffer = Buffer.from(leaf, 'hex');
  for (const sibling of proof) {
    if (sn === 0 || !isLowerHex(sibling, 32)) return false;
    const p = Buffer.from(sibling, 'hex');
    if (fn % 2 === 1 || fn === sn) {
      hash = merkleNodeHash(p, hash);
      while (fn % 2 === 0 && fn !== 0) {
        fn = Math.floor(fn / 2);
        sn = Math.floor(sn / 2);
      }
    } else {
      hash = merkleNodeHash(hash, p);
    }
    fn = Math.floor(fn / 2);
    sn = Math.floor(sn / 2);
  }
  return sn === 0 && hash.toString('hex') === rootHex;
}

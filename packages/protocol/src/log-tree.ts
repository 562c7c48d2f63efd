import { ProtocolError } from './errors.js';
import { merkleNodeHash } from './merkle.js';
import { sha256BytesOf } from './sha256.js';

// The transparency log's tree (DESIGN.md section 17), laid out as Go's golang.org/x/mod/sumdb/tlog
// lays it out, so that its tiles, proofs and checkpoints are read by tlog unchanged:
// - every hash the tree ever needs is "stored" once, in one dense sequence: the leaf hash of
//   record n, then each interior hash that record n completes (StoredHashIndex);
// - a proof or a tree hash is computed from a few stored hashes, never from all leaves.
// Each computation comes in two halves, so that the caller does the IO in between: `...Indexes`
// names the stored hashes it needs, the function of the same name without it takes them (in that
// order) and computes. Tree sizes and indexes are JavaScript numbers: integers up to 2^53 - 1, so
// no bitwise operator touches them.

/** Tile height of the log's hash tiles (DESIGN.md section 17). */
export const LOG_TILE_HEIGHT = 8;

const HASH_SIZE = 32;

/** A hash tile as Go's `tlog.Tile`: height `h`, tile level `l`, number `n`, width `w` (1..2^h). */
export interface LogTile {
  h: number;
  l: number;
  n: number;
  w: number;
}

const pow2 = (k: number) => 2 ** k;
const shr = (n: number, k: number) => Math.floor(n / pow2(k));

/** The largest power of two k < n, and its log2 (n > 1). */
function maxPow2(n: number): { k: number; level: number } {
  let level = 0;
  while (pow2(level + 1) < n) level++;
  return { k: pow2(level), level };
}

function trailingOnes(n: number): number {
  let count = 0;
  while (n % 2 === 1) {
    count++;
    n = Math.floor(n / 2);
  }
  return count;
}

function assertIndex(value: number, name: string): void {
  if (!Number.isSafeInteger(value) || value < 0) throw new ProtocolError(`${name} must be a non-negative integer`);
}

/**
 * RFC 6962 leaf hash of a record, as 32 bytes: SHA-256(0x00 || data) (tlog's RecordHash).
 *
 * @example
 * logRecordHash(Buffer.from(leafData)); // the leaf hash of a run's log entry
 */
export function logRecordHash(data: Uint8Array): Buffer {
  const input = Buffer.allocUnsafe(1 + data.length);
  input[0] = 0x00;
  input.set(data, 1);
  return sha256BytesOf(input);
}

/**
 * Where the `n`th hash of tree level `level` sits in the stored sequence (tlog's StoredHashIndex).
 *
 * @example
 * storedHashIndex(0, 2); // 3: leaf 0, leaf 1, their parent, then leaf 2
 */
export function storedHashIndex(level: number, n: number): number {
  for (let l = level; l > 0; l--) n = 2 * n + 1;
  let i = 0;
  for (; n > 0; n = Math.floor(n / 2)) i += n;
  return i + level;
}

/**
 * How many hashes a tree of `n` records stores (tlog's StoredHashCount).
 *
 * @example
 * storedHashCount(2); // 3
 */
export function storedHashCount(n: number): number {
  if (n === 0) return 0;
  return storedHashIndex(0, n - 1) + 1 + trailingOnes(n - 1);
}

/**
 * The stored hashes that appending record `n` needs: the left siblings it completes, lowest level
 * last (tlog's StoredHashesForRecordHash reads them in this order).
 */
export function storedHashesIndexes(n: number): number[] {
  assertIndex(n, 'n');
  const m = trailingOnes(n);
  const indexes = new Array<number>(m);
  for (let i = 0; i < m; i++) indexes[m - 1 - i] = storedHashIndex(i, shr(n, i) - 1);
  return indexes;
}

/**
 * The hashes to store when record `n` is appended, starting at `storedHashIndex(0, n)`: its leaf
 * hash, then each interior hash it completes. `old` are the hashes at
 * {@link storedHashesIndexes}`(n)`.
 *
 * @example
 * const hashes = storedHashes(n, logRecordHash(data), await read(storedHashesIndexes(n)));
 */
export function storedHashes(n: number, leafHash: Buffer, old: readonly Buffer[]): Buffer[] {
  const m = trailingOnes(n);
  if (old.length !== m) throw new ProtocolError(`record ${n} needs ${m} stored hashes, got ${old.length}`);
  const out = [leafHash];
  let h = leafHash;
  for (let i = 0; i < m; i++) {
    h = merkleNodeHash(old[m - 1 - i] as Buffer, h);
    out.push(h);
  }
  return out;
}

function subTreeIndex(lo: number, hi: number, need: number[]): number[] {
  while (lo < hi) {
    const { k, level } = maxPow2(hi - lo + 1);
    need.push(storedHashIndex(level, shr(lo, level)));
    lo += k;
  }
  return need;
}

/** Hashes the subtree [lo, hi) from the front of `hashes`; returns what it did not use. */
function subTreeHash(lo: number, hi: number, hashes: readonly Buffer[]): [Buffer, readonly Buffer[]] {
  let count = 0;
  while (lo < hi) {
    lo += maxPow2(hi - lo + 1).k;
    count++;
  }
  if (hashes.length < count) throw new ProtocolError('too few stored hashes for the subtree');
  let h = hashes[count - 1] as Buffer;
  for (let i = count - 2; i >= 0; i--) h = merkleNodeHash(hashes[i] as Buffer, h);
  return [h, hashes.slice(count)];
}

/** The stored hashes the root of a tree of `n` records needs. */
export function treeHashIndexes(n: number): number[] {
  assertIndex(n, 'tree size');
  return subTreeIndex(0, n, []);
}

/**
 * The root of a tree of `n` records (n >= 1) from the hashes at {@link treeHashIndexes}`(n)`
 * (tlog's TreeHash).
 *
 * @example
 * const root = treeHash(size, await read(treeHashIndexes(size)));
 */
export function treeHash(n: number, hashes: readonly Buffer[]): Buffer {
  if (n === 0) throw new ProtocolError('an empty tree has no stored root');
  const [h, rest] = subTreeHash(0, n, hashes);
  if (rest.length !== 0) throw new ProtocolError('too many stored hashes for the tree');
  return h;
}

function leafProofIndex(lo: number, hi: number, n: number, need: number[]): number[] {
  if (lo + 1 === hi) return need;
  const { k } = maxPow2(hi - lo);
  if (n < lo + k) {
    leafProofIndex(lo, lo + k, n, need);
    subTreeIndex(lo + k, hi, need);
  } else {
    subTreeIndex(lo, lo + k, need);
    leafProofIndex(lo + k, hi, n, need);
  }
  return need;
}

function leafProof(lo: number, hi: number, n: number, hashes: readonly Buffer[]): [Buffer[], readonly Buffer[]] {
  if (lo + 1 === hi) return [[], hashes];
  const { k } = maxPow2(hi - lo);
  let proof: Buffer[];
  let th: Buffer;
  if (n < lo + k) {
    [proof, hashes] = leafProof(lo, lo + k, n, hashes);
    [th, hashes] = subTreeHash(lo + k, hi, hashes);
  } else {
    [th, hashes] = subTreeHash(lo, lo + k, hashes);
    [proof, hashes] = leafProof(lo + k, hi, n, hashes);
  }
  proof.push(th);
  return [proof, hashes];
}

function assertRecord(t: number, n: number): void {
  assertIndex(t, 'tree size');
  assertIndex(n, 'index');
  if (n >= t) throw new ProtocolError(`index ${n} is not in a tree of ${t} records`);
}

/** The stored hashes an inclusion proof of record `n` in a tree of `t` records needs. */
export function recordProofIndexes(t: number, n: number): number[] {
  assertRecord(t, n);
  return leafProofIndex(0, t, n, []);
}

/**
 * The inclusion proof of record `n` in the tree of `t` records (tlog's ProveRecord, the RFC 6962
 * audit path), from the hashes at {@link recordProofIndexes}`(t, n)`.
 *
 * @example
 * const proof = recordProof(size, index, await read(recordProofIndexes(size, index)));
 */
export function recordProof(t: number, n: number, hashes: readonly Buffer[]): Buffer[] {
  assertRecord(t, n);
  const [proof, rest] = leafProof(0, t, n, hashes);
  if (rest.length !== 0) throw new ProtocolError('too many stored hashes for the proof');
  return proof;
}

function treeProofIndex(lo: number, hi: number, n: number, need: number[]): number[] {
  if (n === hi) return lo === 0 ? need : subTreeIndex(lo, hi, need);
  const { k } = maxPow2(hi - lo);
  if (n <= lo + k) {
    treeProofIndex(lo, lo + k, n, need);
    subTreeIndex(lo + k, hi, need);
  } else {
    subTreeIndex(lo, lo + k, need);
    treeProofIndex(lo + k, hi, n, need);
  }
  return need;
}

function treeProofOf(lo: number, hi: number, n: number, hashes: readonly Buffer[]): [Buffer[], readonly Buffer[]] {
  if (n === hi) {
    if (lo === 0) return [[], hashes];
    const [th, rest] = subTreeHash(lo, hi, hashes);
    return [[th], rest];
  }
  const { k } = maxPow2(hi - lo);
  let proof: Buffer[];
  let th: Buffer;
  if (n <= lo + k) {
    [proof, hashes] = treeProofOf(lo, lo + k, n, hashes);
    [th, hashes] = subTreeHash(lo + k, hi, hashes);
  } else {
    [th, hashes] = subTreeHash(lo, lo + k, hashes);
    [proof, hashes] = treeProofOf(lo + k, hi, n, hashes);
  }
  proof.push(th);
  return [proof, hashes];
}

function assertTrees(t: number, n: number): void {
  assertIndex(t, 'tree size');
  assertIndex(n, 'old tree size');
  if (n < 1 || n > t) throw new ProtocolError(`a consistency proof needs 1 <= from <= to (from ${n}, to ${t})`);
}

/** The stored hashes a consistency proof from `n` records to `t` records needs. */
export function treeProofIndexes(t: number, n: number): number[] {
  assertTrees(t, n);
  return treeProofIndex(0, t, n, []);
}

/**
 * The consistency proof that the tree of `n` records is a prefix of the tree of `t` (tlog's
 * ProveTree), from the hashes at {@link treeProofIndexes}`(t, n)`.
 *
 * @example
 * const proof = treeProof(to, from, await read(treeProofIndexes(to, from)));
 */
export function treeProof(t: number, n: number, hashes: readonly Buffer[]): Buffer[] {
  assertTrees(t, n);
  const [proof, rest] = treeProofOf(0, t, n, hashes);
  if (rest.length !== 0) throw new ProtocolError('too many stored hashes for the proof');
  return proof;
}

/**
 * The stored hashes a tile holds, in order (tlog's ReadTileData): the hashes of tree level
 * `tile.l * tile.h`, numbers `tile.n * 2^h` to `tile.n * 2^h + w - 1`.
 *
 * @example
 * const bytes = Buffer.concat(await read(tileIndexes(tile)));
 */
export function tileIndexes(tile: LogTile): number[] {
  const start = tile.n * pow2(tile.h);
  const out = new Array<number>(tile.w);
  for (let i = 0; i < tile.w; i++) out[i] = storedHashIndex(tile.h * tile.l, start + i);
  return out;
}

/**
 * Whether a tree of `size` records has `tile`: the tile's last hash exists at that size. A tile
 * of width w at level l needs `(n * 2^h + w) * 2^(l*h)` records.
 */
export function tileExists(tile: LogTile, size: number): boolean {
  return (tile.n * pow2(tile.h) + tile.w) * pow2(tile.l * tile.h) <= size;
}

/**
 * A tile's path as Go's `Tile.Path` writes it: `tile/H/L/NNN[.p/W]`, N in groups of three digits
 * with an `x` before each but the last (`x001/x234/067`).
 *
 * @example
 * logTilePath({ h: 8, l: 0, n: 1234067, w: 256 }); // 'tile/8/0/x001/x234/067'
 */
export function logTilePath(tile: LogTile): string {
  let n = tile.n;
  let nStr = String(n % 1000).padStart(3, '0');
  while (n >= 1000) {
    n = Math.floor(n / 1000);
    nStr = `x${String(n % 1000).padStart(3, '0')}/${nStr}`;
  }
  const partial = tile.w === pow2(tile.h) ? '' : `.p/${tile.w}`;
  return `tile/${tile.h}/${tile.l}/${nStr}${partial}`;
}

/**
 * Parses a hash tile path (tlog's ParseTilePath, without data tiles: the log's leaf data is not
 * public). Returns undefined for anything that `logTilePath` would not write.
 *
 * @example
 * parseLogTilePath('tile/8/0/001.p/5'); // { h: 8, l: 0, n: 1, w: 5 }
 */
export function parseLogTilePath(path: string): LogTile | undefined {
  const parts = path.split('/');
  if (parts.length < 4 || parts[0] !== 'tile' || !/^\d{1,2}$/.test(parts[1] ?? '') || !/^\d{1,2}$/.test(parts[2] ?? ''))
    return undefined;
  const h = Number(parts[1]);
  const l = Number(parts[2]);
  if (h < 1 || h > 30 || l > 63) return undefined;
  let w = pow2(h);
  let digits = parts.slice(3);
  const beforeLast = digits[digits.length - 2];
  if (beforeLast?.endsWith('.p')) {
    w = Number(digits[digits.length - 1]);
    if (!/^\d{1,10}$/.test(digits[digits.length - 1] ?? '') || w <= 0 || w >= pow2(h)) return undefined;
    digits = [...digits.slice(0, -2), beforeLast.slice(0, -2)];
  }
  let n = 0;
  for (const group of digits) {
    if (!/^x?\d{3}$/.test(group)) return undefined;
    n = n * 1000 + Number(group.replace('x', ''));
  }
  if (!Number.isSafeInteger(n)) return undefined;
  const tile = { h, l, n, w };
  return logTilePath(tile) === path ? tile : undefined;
}

/** The hashes of a tile's bytes, 32 each. */
export function tileHashes(data: Uint8Array): Buffer[] {
  const out: Buffer[] = [];
  for (let at = 0; at + HASH_SIZE <= data.length; at += HASH_SIZE)
    out.push(Buffer.from(data.subarray(at, at + HASH_SIZE)));
  return out;
}

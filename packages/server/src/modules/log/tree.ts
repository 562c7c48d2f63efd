import {
  canonicalJson,
  logRecordHash,
  storedHashes,
  storedHashesIndexes,
  storedHashIndex,
  treeHash,
  treeHashIndexes,
} from '@svc/protocol';
import type { LeafData } from './store.js';

// The sequencer's pure step: a batch of pending leaves appended to a tree of `size` records, as
// the stored hashes they add and the new root. The store reads the few older hashes it names
// (`olderHashesNeeded`) before and writes what `appendLeaves` returns after.

/** A leaf's six fields alone (a stored row carries more), as the bundle and the inclusion proof show them. */
export function leafView(leaf: LeafData): LeafData {
  return {
    run_id: leaf.run_id,
    subject_type: leaf.subject_type,
    subject_id: leaf.subject_id,
    root_hash: leaf.root_hash,
    event_count: leaf.event_count,
    closed_at: leaf.closed_at,
  };
}

/** A leaf's data as the log hashes it: UTF-8 JCS of its six fields (DESIGN.md section 17). */
export function leafDataText(leaf: LeafData): string {
  return canonicalJson(leafView(leaf));
}

/**
 * The RFC 6962 leaf hash of a leaf: SHA-256(0x00 || JCS(leaf)).
 *
 * @example
 * leafHash(leaf).toString('hex'); // the bundle's verifier.log.leaf_hash
 */
export function leafHash(leaf: LeafData): Buffer {
  return logRecordHash(Buffer.from(leafDataText(leaf), 'utf8'));
}

/**
 * The stored hashes older than a batch that appending `count` records to a tree of `size` needs
 * (left siblings and the new root's subtrees); every other one the batch computes itself.
 */
export function olderHashesNeeded(size: number, count: number): number[] {
  const firstNew = storedHashIndex(0, size);
  const need = new Set<number>();
  for (let n = size; n < size + count; n++) for (const i of storedHashesIndexes(n)) if (i < firstNew) need.add(i);
  for (const i of treeHashIndexes(size + count)) if (i < firstNew) need.add(i);
  return [...need];
}

/** What a batch appends: each leaf's index and hash, the stored hashes it adds, the new root. */
export interface Appended {
  leaves: { run_id: string; leaf_index: number; leaf_hash: Buffer }[];
  hashes: { idx: number; hash: Buffer }[];
  root: Buffer;
}

/**
 * Appends `leaves` to the tree of `size` records, given the hashes {@link olderHashesNeeded} named.
 *
 * @example
 * const older = await storedHashesAt(tx, olderHashesNeeded(size, pending.length));
 * const { leaves, hashes, root } = appendLeaves(size, pending, older);
 */
export function appendLeaves(size: number, leaves: readonly LeafData[], older: ReadonlyMap<number, Buffer>): Appended {
  const known = new Map(older);
  const get = (i: number): Buffer => {
    const h = known.get(i);
    if (!h) throw new Error(`the log's stored hash ${i} is missing`);
    return h;
  };
  const out: Appended = { leaves: [], hashes: [], root: Buffer.alloc(0) };
  leaves.forEach((leaf, i) => {
    const n = size + i;
    const hash = leafHash(leaf);
    const start = storedHashIndex(0, n);
    storedHashes(n, hash, storedHashesIndexes(n).map(get)).forEach((h, j) => {
      known.set(start + j, h);
      out.hashes.push({ idx: start + j, hash: h });
    });
    out.leaves.push({ run_id: leaf.run_id, leaf_index: n, leaf_hash: hash });
  });
  const total = size + leaves.length;
  out.root = treeHash(total, treeHashIndexes(total).map(get));
  return out;
}

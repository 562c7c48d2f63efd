import {
  recordProof,
  recordProofIndexes,
  storedHashes,
  storedHashesIndexes,
  tileExists,
  tileIndexes,
  treeHash,
  treeHashIndexes,
  treeProof,
  treeProofIndexes,
  type LogTile,
} from './log-tree.js';
import { sha256BytesOf } from './sha256.js';

// A transparency log held in memory, appended the way the server's sequencer appends (stored
// hashes only), so that tests of the checking side (svc verify, svc log watch) build real roots,
// proofs and tiles without a server, and can serve a doctored copy of any of them.

/** An in-memory log: its stored hashes and what the read paths compute from them. */
export interface MemoryLog {
  /** Every stored hash, by stored index (tests may overwrite one to doctor the log). */
  stored: Buffer[];
  /** Records appended so far. */
  size(): number;
  /** Appends a record by its leaf hash; returns its index. */
  append(leafHash: Buffer): number;
  /** The root of the tree of the first `size` records (SHA-256 of nothing for 0). */
  root(size?: number): Buffer;
  /** Inclusion proof of record `n` in the tree of `size` records. */
  inclusionProof(size: number, n: number): Buffer[];
  /** Consistency proof from `from` records to `to` records. */
  consistencyProof(from: number, to: number): Buffer[];
  /** A hash tile's bytes as the tree of `size` records has them; undefined when it lacks the tile. */
  tile(tile: LogTile, size?: number): Buffer | undefined;
}

/**
 * A new, empty in-memory log.
 *
 * @example
 * const log = createMemoryLog();
 * const index = log.append(logRecordHash(Buffer.from(leafData)));
 * const note = signNote(checkpointText(origin, log.size(), log.root()), origin, key);
 */
export function createMemoryLog(): MemoryLog {
  const stored: Buffer[] = [];
  let count = 0;
  const read = (indexes: readonly number[]) =>
    indexes.map((i) => {
      const h = stored[i];
      if (!h) throw new Error(`no stored hash ${i}`);
      return h;
    });
  return {
    stored,
    size: () => count,
    append(leafHash) {
      stored.push(...storedHashes(count, leafHash, read(storedHashesIndexes(count))));
      return count++;
    },
    root: (size = count) => (size === 0 ? sha256BytesOf(Buffer.alloc(0)) : treeHash(size, read(treeHashIndexes(size)))),
    inclusionProof: (size, n) => recordProof(size, n, read(recordProofIndexes(size, n))),
    consistencyProof: (from, to) => treeProof(to, from, read(treeProofIndexes(to, from))),
    tile: (tile, size = count) => (tileExists(tile, size) ? Buffer.concat(read(tileIndexes(tile))) : undefined),
  };
}

import { createHash } from 'node:crypto';
import { LOG_TILE_HEIGHT, logTilePath, merkleNodeHash, tileHashes } from '@svc/protocol';
import { checkConsistency } from '@svc/protocol/verify';

// The leaf audit of `svc log watch` (docs/transparency-log.md, "Monitoring"): the hashes of the
// leaves a new checkpoint added, read from the log's level-0 tiles, appended to the right edge of
// the tree the monitor already checked must give the new signed root. Tiles are served from the
// stored leaf hashes, so this catches a leaf row altered or replaced behind a checkpoint, which a
// consistency proof (computed from the stored interior hashes) need not show. The right edge (the
// roots of the perfect subtrees of the kept tree, tlog's "stored hashes" of its right border) and
// the leaf hashes of the last partial tile are all the monitor keeps between two runs.

const TILE_WIDTH = 2 ** LOG_TILE_HEIGHT;

/** What the monitor keeps of a tree it checked: its size, right edge and last partial tile. */
export interface AuditedTree {
  size: number;
  /** Roots of the tree's perfect subtrees, largest (leftmost) first: one per set bit of `size`. */
  edge: Buffer[];
  /** Leaf hashes from the start of the last level-0 tile up to `size` (fewer than 256). */
  tail: Buffer[];
}

/** How the audit reads the log. */
export interface AuditSource {
  /** A tile's bytes by its path (`tile/8/0/...`); throws when it cannot be read. */
  tile(path: string): Promise<Uint8Array>;
  /** A consistency proof (base64 hashes) from `from` records to `to` records. */
  consistency(from: number, to: number): Promise<string[]>;
}

export type AuditResult = { ok: true; tree: AuditedTree } | { ok: false; problem: string; leaf_index?: number };

/** The empty tree: nothing audited yet. */
export const EMPTY_TREE: AuditedTree = { size: 0, edge: [], tail: [] };

/** Appends leaf hashes to a right edge (the levels follow from the size's bits). */
function appendToEdge(edge: readonly Buffer[], size: number, leaves: readonly Buffer[]): Buffer[] {
  const levels: number[] = [];
  for (let bit = 52; bit >= 0; bit--) if (Math.floor(size / 2 ** bit) % 2 === 1) levels.push(bit);
  const stack = edge.map((hash, i) => ({ level: levels[i] ?? 0, hash }));
  for (const leaf of leaves) {
    stack.push({ level: 0, hash: leaf });
    for (;;) {
      const right = stack[stack.length - 1];
      const left = stack[stack.length - 2];
      if (!right || !left || left.level !== right.level) break;
      stack.splice(-2, 2, { level: left.level + 1, hash: merkleNodeHash(left.hash, right.hash) });
    }
  }
  return stack.map((s) => s.hash);
}

/** The RFC 6962 root of a tree from its right edge. */
export function edgeRoot(edge: readonly Buffer[]): Buffer {
  let root = edge[edge.length - 1];
  if (!root) return createHash('sha256').digest();
  for (let i = edge.length - 2; i >= 0; i--) root = merkleNodeHash(edge[i] as Buffer, root);
  return root;
}

/** The level-0 leaf hashes of records [from, to), checked against the kept tail where they overlap. */
async function readLeaves(
  source: AuditSource,
  kept: AuditedTree,
  to: number,
): Promise<{ leaves: Buffer[]; lastTile: Buffer[] } | { problem: string; leaf_index?: number }> {
  const leaves: Buffer[] = [];
  let lastTile: Buffer[] = [];
  const tailStart = kept.size - kept.tail.length;
  for (let n = Math.floor(kept.size / TILE_WIDTH); n * TILE_WIDTH < to; n++) {
    const w = Math.min(TILE_WIDTH, to - n * TILE_WIDTH);
    const path = logTilePath({ h: LOG_TILE_HEIGHT, l: 0, n, w });
    const bytes = await source.tile(path);
    if (bytes.length !== w * 32) return { problem: `tile ${path} has ${bytes.length} bytes, not ${w * 32}` };
    lastTile = tileHashes(bytes);
    for (const [i, hash] of lastTile.entries()) {
      const index = n * TILE_WIDTH + i;
      if (index >= kept.size) leaves.push(hash);
      else if (index >= tailStart && !hash.equals(kept.tail[index - tailStart] ?? Buffer.alloc(0)))
        return {
          problem: `leaf ${index}: its hash in tile ${path} is not the one audited before (${kept.tail[index - tailStart]?.toString('base64') ?? '?'}, now ${hash.toString('base64')})`,
          leaf_index: index,
        };
    }
  }
  return { leaves, lastTile };
}

/** An even number strictly between `a` and `b`, near the middle, if there is one. */
function evenBetween(a: number, b: number): number | undefined {
  let m = Math.floor((a + b) / 2);
  if (m % 2 === 1) m = m + 1 < b ? m + 1 : m - 1;
  return m > a && m < b ? m : undefined;
}

/**
 * The first leaf whose hash, as the tiles serve it, the signed tree does not hold. `proven(j)`:
 * the tiles' leaves before j, on the kept edge, give a tree the server proves is a prefix of the
 * signed one (then every leaf before j is right). It is searched at even j only: a proof from an
 * odd j holds the stored hash of leaf j itself, which a rewritten leaf row would make fail too.
 * That leaves a pair at the end; `pair` when the server's own proof cannot tell which of the two
 * it is (its proof holds the same rewritten hash). Undefined when no proof can be read.
 */
async function firstBadLeaf(
  source: AuditSource,
  kept: AuditedTree,
  leaves: readonly Buffer[],
  size: number,
  rootB64: string,
): Promise<{ index: number; pair: boolean } | undefined> {
  const proven = async (j: number) => {
    const prefixRoot = edgeRoot(appendToEdge(kept.edge, kept.size, leaves.slice(0, j - kept.size)));
    return checkConsistency(await source.consistency(j, size), size, rootB64, j, prefixRoot.toString('base64'));
  };
  let good = kept.size;
  let bad = size;
  try {
    for (let mid = evenBetween(good, bad); mid !== undefined; mid = evenBetween(good, bad)) {
      if (await proven(mid)) good = mid;
      else bad = mid;
    }
    if (bad - good === 1) return { index: good, pair: false };
    return (await proven(good + 1)) ? { index: good + 1, pair: false } : { index: good, pair: true };
  } catch {
    return undefined;
  }
}

/**
 * Audits the leaves a checkpoint of `size` records and root `rootB64` added to the `kept` tree:
 * reads them from level-0 tiles, checks the ones kept from the last partial tile are unchanged,
 * appends them to the kept right edge and compares the root. A mismatch names the first leaf the
 * signed tree does not hold.
 *
 * @example
 * const result = await auditLeaves(source, state.tree, checkpoint.tree_size, checkpoint.root_hash_b64);
 */
export async function auditLeaves(
  source: AuditSource,
  kept: AuditedTree,
  size: number,
  rootB64: string,
): Promise<AuditResult> {
  const read = await readLeaves(source, kept, size);
  if ('problem' in read) return { ok: false, ...read };
  const edge = appendToEdge(kept.edge, kept.size, read.leaves);
  if (edgeRoot(edge).toString('base64') === rootB64) {
    const tailLength = size % TILE_WIDTH;
    const tail = size === kept.size ? kept.tail : read.lastTile.slice(0, tailLength);
    return { ok: true, tree: { size, edge, tail: tailLength === 0 ? [] : tail } };
  }
  const found = await firstBadLeaf(source, kept, read.leaves, size, rootB64);
  if (!found)
    return {
      ok: false,
      problem: `the leaves ${kept.size}..${size - 1} served as tiles do not hash to the signed root (no consistency proof to name the leaf)`,
    };
  const { index, pair } = found;
  const before = index > kept.size ? ` (leaves ${kept.size}..${index - 1} check out)` : '';
  return {
    ok: false,
    problem: pair
      ? `leaf ${index} or ${index + 1}: their hashes in the tiles are not the ones the signed checkpoint of ${size} records holds, and the server's proofs hold the same hashes${before}`
      : `leaf ${index}: its hash in the tiles is not the one the signed checkpoint of ${size} records holds${before}`,
    leaf_index: index,
  };
}

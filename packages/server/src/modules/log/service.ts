import {
  LOG_TILE_HEIGHT,
  noteVerifierKey,
  parseLogTilePath,
  recordProof,
  recordProofIndexes,
  tileExists,
  tileIndexes,
  treeProof,
  treeProofIndexes,
} from '@svc/protocol';
import type { Db, Queryable } from '../../platform/db/index.js';
import { ApiError } from '../../platform/errors.js';
import type { PlatformSecrets } from '../../platform/secrets.js';
import type { LogSequencer } from './sequencer.js';
import { leafView } from './tree.js';
import {
  checkpointAt,
  knownOrigins,
  latestCheckpoint,
  leafOfRun,
  recordOrigin,
  storedHashesAt,
  type LeafRow,
} from './store.js';

/** The transparency log as the rest of the server sees it (`ctx.transparencyLog`). */
export interface TransparencyLog {
  /** The name checkpoints are signed under (SVC_LOG_ORIGIN, or the first one this store used). */
  origin: string;
  /** SVC_LOG_CHECKPOINT_MS: the least time between two checkpoints. */
  intervalMs: number;
  sequencer: LogSequencer;
}

/** What the log's read paths use. */
export interface LogDeps {
  db: Db;
  secrets: PlatformSecrets;
  transparencyLog: TransparencyLog;
}

/**
 * The origin this instance signs under: `configured` (SVC_LOG_ORIGIN) when set, else the first
 * name the store's log used, else `derived` (from SVC_PUBLIC_URL). Recorded, so that
 * `GET /api/v1/keys/platform` keeps listing verifier keys for every name ever used.
 *
 * @example
 * const origin = await resolveLogOrigin(db, config.log.origin, config.log.derivedOrigin);
 */
export async function resolveLogOrigin(
  db: Queryable,
  configured: string | undefined,
  derived: string,
): Promise<string> {
  const origin = configured ?? (await knownOrigins(db))[0] ?? derived;
  await recordOrigin(db, origin);
  return origin;
}

/**
 * The log's names and their note verifier keys: one for every name the log signed under and
 * every platform key that ever signed (retired keys stay listed, so old checkpoints verify).
 */
export async function logVerifierKeys(deps: LogDeps): Promise<{ origin: string; verifier_keys: string[] }> {
  const [origins, keys] = await Promise.all([knownOrigins(deps.db), deps.secrets.listKeys()]);
  const names = [deps.transparencyLog.origin, ...origins.filter((o) => o !== deps.transparencyLog.origin)];
  return {
    origin: deps.transparencyLog.origin,
    verifier_keys: names.flatMap((name) => keys.map((k) => noteVerifierKey(name, k.public_key_hex))),
  };
}

async function currentCheckpoint(db: Queryable) {
  const latest = await latestCheckpoint(db);
  if (!latest) throw new ApiError('not_found', 'the transparency log has no checkpoint yet');
  return latest;
}

/** GET /api/v1/log/checkpoint: the latest signed note. */
export async function logCheckpoint(deps: LogDeps): Promise<string> {
  return (await currentCheckpoint(deps.db)).note;
}

/**
 * GET /api/v1/log/tile/...: a hash tile's bytes, as tlog names and reads it. Not found: a path
 * tlog would not write, another height than 8, or a tile the latest checkpoint's tree lacks.
 */
export async function logTile(deps: LogDeps, path: string): Promise<{ bytes: Buffer; full: boolean }> {
  const tile = parseLogTilePath(`tile/${path}`);
  if (!tile || tile.h !== LOG_TILE_HEIGHT) throw new ApiError('not_found', `no tile ${path}`);
  const { tree_size } = await currentCheckpoint(deps.db);
  if (!tileExists(tile, tree_size)) throw new ApiError('not_found', `no tile ${path} in the tree of ${tree_size}`);
  const indexes = tileIndexes(tile);
  const hashes = await storedHashesAt(deps.db, indexes);
  return { bytes: Buffer.concat(indexes.map((i) => stored(hashes, i))), full: tile.w === 2 ** tile.h };
}

function stored(hashes: ReadonlyMap<number, Buffer>, i: number): Buffer {
  const h = hashes.get(i);
  if (!h) throw new Error(`the log's stored hash ${i} is missing`);
  return h;
}

function base64(proof: readonly Buffer[]): string[] {
  return proof.map((h) => h.toString('base64'));
}

/** GET /api/v1/log/proof/consistency: that the tree of `from` is a prefix of the tree of `to`. */
export async function consistencyProof(deps: LogDeps, from: number, to: number) {
  const { tree_size } = await currentCheckpoint(deps.db);
  if (from > to)
    throw new ApiError('invalid_request', '`from` must be at most `to`', [{ path: '/from', message: 'must be <= to' }]);
  if (to > tree_size)
    throw new ApiError('invalid_request', `the log has ${tree_size} records`, [
      { path: '/to', message: `must be <= ${tree_size}` },
    ]);
  const indexes = treeProofIndexes(to, from);
  const hashes = await storedHashesAt(deps.db, indexes);
  return {
    from,
    to,
    proof: base64(
      treeProof(
        to,
        from,
        indexes.map((i) => stored(hashes, i)),
      ),
    ),
  };
}

async function proofOf(db: Queryable, leaf: LeafRow & { leaf_index: number; leaf_hash_hex: string }, size: number) {
  const indexes = recordProofIndexes(size, leaf.leaf_index);
  const hashes = await storedHashesAt(db, indexes);
  return base64(
    recordProof(
      size,
      leaf.leaf_index,
      indexes.map((i) => stored(hashes, i)),
    ),
  );
}

const sequenced = (leaf: LeafRow): leaf is LeafRow & { leaf_index: number; leaf_hash_hex: string } =>
  leaf.leaf_index !== null && leaf.leaf_hash_hex !== null;

/**
 * GET /api/v1/log/proof/inclusion: a run's leaf and its inclusion proof in the tree of
 * `treeSize` (default: the latest checkpoint's), with that tree's checkpoint when one was signed
 * at that size. Another tenant's run, or one not yet in the log, is not found.
 */
export async function inclusionProof(deps: LogDeps, orgId: string, runId: string, treeSize: number | undefined) {
  const leaf = await leafOfRun(deps.db, runId, orgId);
  if (!leaf) throw new ApiError('not_found', `no log entry for run ${runId}`);
  if (!sequenced(leaf)) throw new ApiError('not_found', `run ${runId} is not in the log yet (pending)`);
  const latest = await currentCheckpoint(deps.db);
  const size = treeSize ?? latest.tree_size;
  if (size > latest.tree_size)
    throw new ApiError('invalid_request', `the log has ${latest.tree_size} records`, [
      { path: '/tree_size', message: `must be <= ${latest.tree_size}` },
    ]);
  if (leaf.leaf_index >= size)
    throw new ApiError('invalid_request', `run ${runId} is record ${leaf.leaf_index}: not in a tree of ${size}`, [
      { path: '/tree_size', message: `must be > ${leaf.leaf_index}` },
    ]);
  const checkpoint = size === latest.tree_size ? latest : await checkpointAt(deps.db, size);
  return {
    run_id: runId,
    leaf_index: leaf.leaf_index,
    tree_size: size,
    leaf: leafView(leaf),
    leaf_hash: leaf.leaf_hash_hex,
    proof: await proofOf(deps.db, leaf, size),
    checkpoint: checkpoint?.note ?? null,
  };
}

/** How often a bundle waiting for its run's checkpoint looks again. */
const BUNDLE_POLL_MS = 25;

/**
 * A bundle's `verifier.log` (docs/transparency-log.md): the run's leaf with its inclusion proof in
 * the latest checkpoint. A run closed but not yet in a checkpoint is waited for, up to twice the
 * checkpoint interval; after that, and for a run still open, `{status: "pending", leaf}` (the
 * leaf's data once the run is closed, else null).
 *
 * @example
 * const section = await bundleLogSection(ctx, run.id);
 */
export async function bundleLogSection(deps: LogDeps, runId: string): Promise<Record<string, unknown>> {
  const deadline = Date.now() + 2 * deps.transparencyLog.intervalMs;
  let leaf = await leafOfRun(deps.db, runId);
  if (!leaf) return { status: 'pending', leaf: null };
  deps.transparencyLog.sequencer.nudge();
  for (;;) {
    const latest = await latestCheckpoint(deps.db);
    if (sequenced(leaf) && latest && leaf.leaf_index < latest.tree_size) {
      const keys = await logVerifierKeys(deps);
      return {
        origin: latest.origin,
        checkpoint: latest.note,
        leaf_index: leaf.leaf_index,
        leaf: leafView(leaf),
        leaf_hash: leaf.leaf_hash_hex,
        inclusion_proof: await proofOf(deps.db, leaf, latest.tree_size),
        verifier_keys: keys.verifier_keys,
      };
    }
    if (Date.now() >= deadline) return { status: 'pending', leaf: leafView(leaf) };
    await new Promise((resolve) => setTimeout(resolve, BUNDLE_POLL_MS));
    leaf = (await leafOfRun(deps.db, runId)) ?? leaf;
  }
}

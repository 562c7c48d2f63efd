import type { Queryable } from '../../platform/db/index.js';

// SQL of the transparency log (migrations/0190_transparency_log.sql): every statement on
// log_leaves, log_hashes, log_checkpoints, log_origins and log_sequencer. Hashes are bytea in the
// store and hex at this boundary (portable over both drivers' array parameters).

/** A leaf's data as the log commits to it (DESIGN.md section 17), before JCS. */
export interface LeafData {
  run_id: string;
  subject_type: string;
  subject_id: string;
  root_hash: string;
  event_count: number;
  closed_at: string;
}

/** A leaf as stored: its data, its tenant, and, once sequenced, its index and hash. */
export interface LeafRow extends LeafData {
  org_id: string;
  leaf_index: number | null;
  leaf_hash_hex: string | null;
}

/** A signed checkpoint as stored. */
export interface CheckpointRow {
  tree_size: number;
  root_hash_hex: string;
  origin: string;
  note: string;
}

const LEAF_COLUMNS = `run_id, org_id, subject_type, subject_id, root_hash, event_count, closed_at,
  leaf_index::float8 AS leaf_index, encode(leaf_hash, 'hex') AS leaf_hash_hex`;

/**
 * The statement that enters closed runs as pending leaves, for a `WITH` of the evidence store's
 * signing statements: `source` names a CTE returning the signed `evidence_runs` rows (id, org_id,
 * subject_type, job_id, root_hash, event_count, signed_at). It costs no round trip of its own.
 *
 * @example
 * `WITH up AS (UPDATE evidence_runs ... RETURNING *), lg AS (${pendingLeavesFrom('up')}) SELECT id FROM up`
 */
export function pendingLeavesFrom(source: string): string {
  return `INSERT INTO log_leaves (run_id, org_id, subject_type, subject_id, root_hash, event_count, closed_at)
    SELECT id, org_id, subject_type, job_id, root_hash, event_count,
           to_char(signed_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') FROM ${source}
    ON CONFLICT (run_id) DO NOTHING`;
}

/**
 * Takes or renews the sequencer's lease for `holder` (when it is free, expired or already
 * `holder`'s) and locks its row until the transaction ends, so that two sequencers never number
 * leaves at once. Returns the stored tree's size, or undefined when another holds the lease.
 */
export async function takeLease(tx: Queryable, holder: string, leaseMs: number): Promise<number | undefined> {
  const { rows } = await tx.query<{ tree_size: number }>(
    `UPDATE log_sequencer SET holder = $1, expires_at = clock_timestamp() + $2 * interval '1 millisecond'
      WHERE id = 1 AND (holder = $1 OR holder IS NULL OR expires_at < clock_timestamp())
      RETURNING tree_size::float8 AS tree_size`,
    [holder, leaseMs],
  );
  return rows[0]?.tree_size;
}

/** Gives the lease up (a clean stop), so that another instance takes over at its next tick. */
export async function releaseLease(db: Queryable, holder: string): Promise<void> {
  await db.query(`UPDATE log_sequencer SET expires_at = '-infinity' WHERE id = 1 AND holder = $1`, [holder]);
}

/** The oldest pending leaves, in arrival order, at most `limit`. */
export async function pendingLeaves(tx: Queryable, limit: number): Promise<LeafData[]> {
  const { rows } = await tx.query<LeafData>(
    `SELECT run_id, subject_type, subject_id, root_hash, event_count, closed_at FROM log_leaves
      WHERE leaf_index IS NULL ORDER BY arrival LIMIT $1`,
    [limit],
  );
  return rows;
}

/** The stored hashes at `indexes`, by index. */
export async function storedHashesAt(db: Queryable, indexes: readonly number[]): Promise<Map<number, Buffer>> {
  if (indexes.length === 0) return new Map();
  const { rows } = await db.query<{ idx: number; hash: string }>(
    `SELECT idx::float8 AS idx, encode(hash, 'hex') AS hash FROM log_hashes WHERE idx = ANY($1::bigint[])`,
    [indexes],
  );
  return new Map(rows.map((r) => [Number(r.idx), Buffer.from(r.hash, 'hex')]));
}

/** One sequencing step's writes: the leaves' indexes and hashes, the new stored hashes, the new size. */
export interface SequencedBatch {
  leaves: readonly { run_id: string; leaf_index: number; leaf_hash: Buffer }[];
  hashes: readonly { idx: number; hash: Buffer }[];
  treeSize: number;
}

/** Writes a sequenced batch in one statement (under the lease's row lock). */
export async function writeBatch(tx: Queryable, batch: SequencedBatch): Promise<void> {
  await tx.query(
    `WITH h AS (INSERT INTO log_hashes (idx, hash) SELECT i, decode(x, 'hex') FROM unnest($1::bigint[], $2::text[]) AS v(i, x)),
          l AS (UPDATE log_leaves SET leaf_index = v.i, leaf_hash = decode(v.x, 'hex')
                  FROM unnest($3::text[], $4::bigint[], $5::text[]) AS v(r, i, x) WHERE log_leaves.run_id = v.r)
     UPDATE log_sequencer SET tree_size = $6 WHERE id = 1`,
    [
      batch.hashes.map((h) => h.idx),
      batch.hashes.map((h) => h.hash.toString('hex')),
      batch.leaves.map((l) => l.run_id),
      batch.leaves.map((l) => l.leaf_index),
      batch.leaves.map((l) => l.leaf_hash.toString('hex')),
      batch.treeSize,
    ],
  );
}

/** Stores a signed checkpoint (a size is signed once). */
export async function insertCheckpoint(tx: Queryable, c: CheckpointRow): Promise<void> {
  await tx.query(
    `INSERT INTO log_checkpoints (tree_size, root_hash, origin, note) VALUES ($1, decode($2, 'hex'), $3, $4)
     ON CONFLICT (tree_size) DO NOTHING`,
    [c.tree_size, c.root_hash_hex, c.origin, c.note],
  );
}

const CHECKPOINT_COLUMNS = `tree_size::float8 AS tree_size, encode(root_hash, 'hex') AS root_hash_hex, origin, note`;

/** The latest signed checkpoint, if any. */
export async function latestCheckpoint(db: Queryable): Promise<CheckpointRow | undefined> {
  const { rows } = await db.query<CheckpointRow>(
    `SELECT ${CHECKPOINT_COLUMNS} FROM log_checkpoints ORDER BY tree_size DESC LIMIT 1`,
  );
  return rows[0];
}

/** The checkpoint signed at exactly `size`, if one was. */
export async function checkpointAt(db: Queryable, size: number): Promise<CheckpointRow | undefined> {
  const { rows } = await db.query<CheckpointRow>(
    `SELECT ${CHECKPOINT_COLUMNS} FROM log_checkpoints WHERE tree_size = $1`,
    [size],
  );
  return rows[0];
}

/** Every checkpoint, smallest first (tests and monitors' replay). */
export async function allCheckpoints(db: Queryable): Promise<CheckpointRow[]> {
  const { rows } = await db.query<CheckpointRow>(
    `SELECT ${CHECKPOINT_COLUMNS} FROM log_checkpoints ORDER BY tree_size`,
  );
  return rows;
}

/** A run's leaf, pending or sequenced; `orgId` limits it to that tenant's runs. */
export async function leafOfRun(db: Queryable, runId: string, orgId?: string): Promise<LeafRow | undefined> {
  const { rows } = await db.query<LeafRow>(
    `SELECT ${LEAF_COLUMNS} FROM log_leaves WHERE run_id = $1 AND ($2::text IS NULL OR org_id = $2)`,
    [runId, orgId ?? null],
  );
  return rows[0];
}

/** Records a name the log signs under; returns every name it ever signed under, the first first. */
export async function recordOrigin(db: Queryable, origin: string): Promise<string[]> {
  await db.query('INSERT INTO log_origins (origin) VALUES ($1) ON CONFLICT (origin) DO NOTHING', [origin]);
  return knownOrigins(db);
}

/** Every name the log signed under, the first first. */
export async function knownOrigins(db: Queryable): Promise<string[]> {
  const { rows } = await db.query<{ origin: string }>('SELECT origin FROM log_origins ORDER BY first_used, origin');
  return rows.map((r) => r.origin);
}

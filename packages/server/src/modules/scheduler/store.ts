import type { Queryable } from '../../platform/db/index.js';
import type { JobRow } from '../jobs/store.js';

/** Default lease length; `SVC_LEASE_SECONDS` overrides it. */
export const LEASE_SECONDS = 30;

export interface WorkRow {
  id: string;
  job_id: string;
  org_id: string;
  node_id: string;
  type: string;
  kind: number;
  model: string | null;
  payload: Record<string, unknown>;
  stream: boolean;
  status: 'leased' | 'delivered' | 'completed' | 'failed' | 'lost' | 'cancelled';
  lease_expires_at: Date;
  price_micro_per_unit: number;
  result_hash: string | null;
  result_content_type: string | null;
  metering_units: number | null;
  usage: Record<string, unknown> | null;
}

/** Pending jobs of the pools a node may serve, oldest first, without locking them. */
export async function pendingJobs(db: Queryable, pools: string[], limit: number): Promise<JobRow[]> {
  const { rows } = await db.query<JobRow>(
    `SELECT * FROM jobs WHERE status = 'pending' AND execution_pool = ANY($1) ORDER BY pending_at, id LIMIT $2`,
    [pools, limit],
  );
  return rows;
}

/**
 * Locks the chosen jobs that are still pending, skipping any another transaction holds: only
 * these may be assigned by the caller's transaction.
 */
export async function lockStillPending(db: Queryable, jobIds: string[]): Promise<JobRow[]> {
  if (jobIds.length === 0) return [];
  const { rows } = await db.query<JobRow>(
    `SELECT * FROM jobs WHERE id = ANY($1) AND status = 'pending' ORDER BY pending_at, id FOR UPDATE SKIP LOCKED`,
    [jobIds],
  );
  return rows;
}

export async function insertWork(
  db: Queryable,
  w: Omit<WorkRow, 'status' | 'lease_expires_at' | 'result_hash' | 'result_content_type' | 'metering_units' | 'usage'>,
  leaseSeconds = LEASE_SECONDS,
): Promise<WorkRow> {
  const { rows } = await db.query<WorkRow>(
    `INSERT INTO work_items (id, job_id, org_id, node_id, type, kind, model, payload, stream, status, lease_expires_at, price_micro_per_unit)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'leased', now() + make_interval(secs => $10), $11) RETURNING *`,
    [
      w.id,
      w.job_id,
      w.org_id,
      w.node_id,
      w.type,
      w.kind,
      w.model,
      JSON.stringify(w.payload),
      w.stream,
      leaseSeconds,
      w.price_micro_per_unit,
    ],
  );
  const row = rows[0];
  if (!row) throw new Error('work insert returned nothing');
  return row;
}

/**
 * Hands out work already leased to this node but not yet sent to it (gateway requests routed
 * straight to it), oldest first: marks it dispatched and starts its lease now.
 */
export async function takeLeasedWork(
  db: Queryable,
  nodeId: string,
  max: number,
  leaseSeconds = LEASE_SECONDS,
): Promise<WorkRow[]> {
  const { rows } = await db.query<WorkRow>(
    `UPDATE work_items SET dispatched_at = now(), lease_expires_at = now() + make_interval(secs => $3), updated_at = now()
      WHERE id IN (SELECT id FROM work_items WHERE node_id = $1 AND status = 'leased' AND dispatched_at IS NULL
                    ORDER BY created_at, id LIMIT $2 FOR UPDATE SKIP LOCKED)
        AND dispatched_at IS NULL
      RETURNING *`,
    [nodeId, max, leaseSeconds],
  );
  return rows.sort((a, b) => a.id.localeCompare(b.id));
}

/** Work marked dispatched whose in-memory hand-over found the poll gone: back to the node's next poll. */
export async function undispatchWork(db: Queryable, workId: string): Promise<void> {
  await db.query("UPDATE work_items SET dispatched_at = NULL, updated_at = now() WHERE id = $1 AND status = 'leased'", [
    workId,
  ]);
}

export async function countOpenWork(db: Queryable, nodeId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM work_items WHERE node_id = $1 AND status IN ('leased', 'delivered')",
    [nodeId],
  );
  return rows[0]?.n ?? 0;
}

/** Extends the leases of the listed work this node still holds; returns the ids it no longer holds. */
export async function renewLeases(
  db: Queryable,
  nodeId: string,
  workIds: string[],
  leaseSeconds = LEASE_SECONDS,
): Promise<{ renewed: string[]; gone: string[] }> {
  if (workIds.length === 0) return { renewed: [], gone: [] };
  const { rows } = await db.query<{ id: string }>(
    `UPDATE work_items SET lease_expires_at = now() + make_interval(secs => $3), updated_at = now()
      WHERE node_id = $1 AND id = ANY($2) AND status IN ('leased', 'delivered') RETURNING id`,
    [nodeId, workIds, leaseSeconds],
  );
  const renewed = rows.map((r) => r.id);
  const rest = workIds.filter((id) => !renewed.includes(id));
  if (rest.length === 0) return { renewed, gone: [] };
  // Work this node has just finished (its receipt applied while the node still lists it, as its
  // delivery answer is in flight) is not gone: telling the node to stop it would abort that answer.
  const { rows: finished } = await db.query<{ id: string }>(
    `SELECT id FROM work_items WHERE node_id = $1 AND id = ANY($2) AND status IN ('completed', 'failed')`,
    [nodeId, rest],
  );
  const done = new Set(finished.map((r) => r.id));
  return { renewed, gone: rest.filter((id) => !done.has(id)) };
}

export async function findWork(db: Queryable, workId: string, lock = false): Promise<WorkRow | undefined> {
  const { rows } = await db.query<WorkRow>(`SELECT * FROM work_items WHERE id = $1 ${lock ? 'FOR UPDATE' : ''}`, [
    workId,
  ]);
  return rows[0];
}

/** Expired leases, locked for this transaction so one instance handles each. */
export async function lockExpiredWork(db: Queryable, limit: number): Promise<WorkRow[]> {
  const { rows } = await db.query<WorkRow>(
    `SELECT * FROM work_items WHERE status IN ('leased', 'delivered') AND lease_expires_at < now() ORDER BY lease_expires_at LIMIT $1 FOR UPDATE SKIP LOCKED`,
    [limit],
  );
  return rows;
}

export async function setWorkStatus(db: Queryable, workId: string, status: WorkRow['status']): Promise<void> {
  await db.query('UPDATE work_items SET status = $2, updated_at = now() WHERE id = $1', [workId, status]);
}

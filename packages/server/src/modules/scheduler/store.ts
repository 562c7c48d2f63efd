import type { Queryable } from '../../platform/db/index.js';
import type { JobRow } from '../jobs/store.js';

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

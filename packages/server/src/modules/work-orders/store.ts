import type { Queryable } from '../../platform/db/index.js';
import type { CheckCommand, Decision, PolicyPreset, TrustTier } from './policy.js';
import type { WorkOrderStatus } from './states.js';

/** SQL for `work_repositories` and `work_orders`; this module is their only writer. */

export interface RepositoryRow {
  id: string;
  org_id: string;
  repository_url: string;
  default_branch: string;
  label: string | null;
  token_sealed: string | null;
  token_key_id: string | null;
  created_at: Date;
  last_preflight_at: Date | null;
  last_preflight_status: string | null;
  last_preflight_job_id: string | null;
}

export async function insertRepository(
  db: Queryable,
  r: Pick<
    RepositoryRow,
    'id' | 'org_id' | 'repository_url' | 'default_branch' | 'label' | 'token_sealed' | 'token_key_id'
  >,
): Promise<RepositoryRow> {
  const { rows } = await db.query<RepositoryRow>(
    `INSERT INTO work_repositories (id, org_id, repository_url, default_branch, label, token_sealed, token_key_id) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING *`,
    [r.id, r.org_id, r.repository_url, r.default_branch, r.label, r.token_sealed, r.token_key_id],
  );
  const row = rows[0];
  if (!row) throw new Error('repository insert returned nothing');
  return row;
}

export async function findRepository(db: Queryable, orgId: string, id: string): Promise<RepositoryRow | undefined> {
  const { rows } = await db.query<RepositoryRow>(
    'SELECT * FROM work_repositories WHERE org_id = $1 AND id = $2 AND deleted_at IS NULL',
    [orgId, id],
  );
  return rows[0];
}

export async function listRepositories(db: Queryable, orgId: string): Promise<RepositoryRow[]> {
  const { rows } = await db.query<RepositoryRow>(
    'SELECT * FROM work_repositories WHERE org_id = $1 AND deleted_at IS NULL ORDER BY created_at DESC, id DESC LIMIT 500',
    [orgId],
  );
  return rows;
}

/** Deletes a connection: its token is erased; orders that used it keep their own record. */
export async function deleteRepository(db: Queryable, orgId: string, id: string): Promise<boolean> {
  const { rowCount } = await db.query(
    'UPDATE work_repositories SET deleted_at = now(), token_sealed = NULL, token_key_id = NULL WHERE org_id = $1 AND id = $2 AND deleted_at IS NULL',
    [orgId, id],
  );
  return rowCount === 1;
}

export async function notePreflight(
  db: Queryable,
  id: string,
  status: string,
  jobId: string | null,
): Promise<RepositoryRow | undefined> {
  const { rows } = await db.query<RepositoryRow>(
    'UPDATE work_repositories SET last_preflight_at = now(), last_preflight_status = $2, last_preflight_job_id = $3 WHERE id = $1 RETURNING *',
    [id, status, jobId],
  );
  return rows[0];
}

/** The request as resolved at creation: what the order runs under. */
export interface OrderSpec {
  goal: string;
  title: string | null;
  architecture_plan: string | null;
  jurisdiction: string | null;
  repository_url: string;
  site_url: string | null;
  base_branch: string;
  work_branch: string;
  trust_tier: TrustTier;
  policy_preset: PolicyPreset;
  allowed_paths: string[];
  forbidden_paths: string[];
  required_checks: string[];
  model: string | null;
  requires_tee: boolean;
  timeout_seconds: number;
  /** Blob key of the base bundle the node cloned (kept for the push and the rollback). */
  base_bundle_key: string;
  /** The commands the required checks stand for, derived from the base commit's tooling (absent before 2026-12). */
  check_commands?: CheckCommand[];
  /** The base's tooling files, where those commands are defined. */
  check_files?: string[];
}

export interface Approval {
  decision: 'approved' | 'rejected';
  by: string;
  role: string;
  reason: string | null;
  at: string;
}

/**
 * The result as certified, less the bundle (kept as a blob): `changed_paths` and `diff` recomputed
 * by the server from the bundles; `checks`, `capsule` and `reported_*` as the node signed them.
 */
export interface StoredResult {
  changed_paths: string[];
  diff: string;
  diff_truncated: boolean;
  diff_sha256: string;
  /** The node's own list and diff hash (absent on results stored before the server recomputed them). */
  reported_changed_paths?: string[];
  reported_diff_sha256?: string;
  checks: {
    command: string;
    argv: string[];
    exit_code: number | null;
    timed_out: boolean;
    duration_ms: number;
    output_sha256: string;
    output_tail: string;
  }[];
  capsule: Record<string, unknown>;
  result_hash: string;
  receipt_id: string | null;
  node_id: string | null;
  work_bundle_key: string | null;
}

export interface OrderRow {
  id: string;
  org_id: string;
  buyer_id: string;
  repository_id: string | null;
  spec: OrderSpec;
  status: WorkOrderStatus;
  decision: Decision | null;
  job_id: string | null;
  base_commit: string | null;
  commit_sha: string | null;
  result: StoredResult | null;
  approvals: Approval[];
  pr: Record<string, unknown> | null;
  rollback: Record<string, unknown> | null;
  failure_reason: string | null;
  created_at: Date;
  updated_at: Date;
}

export async function insertOrder(
  db: Queryable,
  o: Pick<OrderRow, 'id' | 'org_id' | 'buyer_id' | 'repository_id' | 'spec' | 'job_id' | 'base_commit'>,
): Promise<OrderRow> {
  const { rows } = await db.query<OrderRow>(
    `INSERT INTO work_orders (id, org_id, buyer_id, repository_id, spec, status, job_id, base_commit) VALUES ($1, $2, $3, $4, $5, 'queued', $6, $7) RETURNING *`,
    [o.id, o.org_id, o.buyer_id, o.repository_id, JSON.stringify(o.spec), o.job_id, o.base_commit],
  );
  const row = rows[0];
  if (!row) throw new Error('work order insert returned nothing');
  return row;
}

export async function findOrder(
  db: Queryable,
  orgId: string,
  id: string,
  forUpdate = false,
): Promise<OrderRow | undefined> {
  const { rows } = await db.query<OrderRow>(
    `SELECT * FROM work_orders WHERE org_id = $1 AND id = $2${forUpdate ? ' FOR UPDATE' : ''}`,
    [orgId, id],
  );
  return rows[0];
}

export async function listOrders(
  db: Queryable,
  orgId: string,
  q: { status?: string; limit: number; offset: number },
): Promise<{ rows: OrderRow[]; total: number }> {
  const params: unknown[] = [orgId];
  let where = 'org_id = $1';
  if (q.status) {
    params.push(q.status);
    where += ` AND status = $${params.length}`;
  }
  const total = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM work_orders WHERE ${where}`, params);
  const { rows } = await db.query<OrderRow>(
    `SELECT * FROM work_orders WHERE ${where} ORDER BY created_at DESC, id DESC LIMIT ${q.limit} OFFSET ${q.offset}`,
    params,
  );
  return { rows, total: total.rows[0]?.n ?? 0 };
}

export type OrderPatch = Partial<
  Pick<OrderRow, 'status' | 'decision' | 'commit_sha' | 'result' | 'approvals' | 'pr' | 'rollback' | 'failure_reason'>
>;

const JSON_COLUMNS = new Set(['decision', 'result', 'approvals', 'pr', 'rollback']);

/** Applies `patch` to an order only while it is still `from` (the caller holds its row lock). */
export async function updateOrder(
  db: Queryable,
  id: string,
  from: string,
  patch: OrderPatch,
): Promise<OrderRow | undefined> {
  const entries = Object.entries(patch);
  const params: unknown[] = [id, from];
  const sets = entries.map(([k, v]) => {
    params.push(JSON_COLUMNS.has(k) && v !== null ? JSON.stringify(v) : v);
    return `${k} = $${params.length}`;
  });
  const { rows } = await db.query<OrderRow>(
    `UPDATE work_orders SET ${[...sets, 'updated_at = now()'].join(', ')} WHERE id = $1 AND status = $2 RETURNING *`,
    params,
  );
  return rows[0];
}

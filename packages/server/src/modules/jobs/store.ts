import type { Queryable } from '../../platform/db/index.js';
import { statesBefore, type JobStatus } from './states.js';

/** The validated job request as stored in `jobs.spec`. */
export interface JobSpec {
  model: string | null;
  region: string | null;
  strict_jurisdiction: string | null;
  delivery_mode: 'inline' | 'put';
  inline_text: string | null;
  output_file: string | null;
  payload_url: string | null;
  delivery_artifact_put_url: string | null;
  delivery_manifest_put_url: string | null;
  delivery_webhook_url: string | null;
  min_reputation: number | null;
  green_only: boolean;
  requires_tee: boolean;
  required_capabilities: string[];
  runner_args: string[];
  timeout_seconds: number;
  /** Kinds 5-7: the container image and limits the buyer asked for (the oci runner). */
  image?: string;
  memory_mb?: number;
  cpus?: number;
  pids?: number;
  /** Kinds 5-8 and 10: the buyer asked for network egress (absent: none). */
  network?: 'egress';
  estimates: Record<string, number>;
  estimated_units: number;
  /** Inputs prepared for the node (lines of inline_text or of the payload document). */
  inputs?: string[];
  /** Kind 9: the repository-work payload (built by modules/work-orders; see @svc/protocol RepositoryWorkPayload). */
  repository_work?: Record<string, unknown>;
  /** Kinds 8 and 10: the capture set processed (owned by modules/capture while the job runs). */
  capture_set_id?: string;
  /** Kind 3: the audio's duration as the server measured it at submission: what is billed (platform/audio.ts). */
  measured_audio_ms?: number;
}

export interface JobRow {
  id: string;
  org_id: string;
  buyer_id: string;
  kind: number;
  status: JobStatus;
  execution_pool: 'public' | 'sovereign';
  budget_cents: number;
  max_price_micro_per_unit: number;
  currency: string;
  spec: JobSpec;
  estimated_cost_micro: number;
  estimated_duration_ms: number;
  hold_id: string | null;
  attempts: number;
  node_id: string | null;
  work_id: string | null;
  charged_cents: number | null;
  charged_micro: number | null;
  result_hash: string | null;
  failure_reason: string | null;
  created_at: Date;
  submitted_at: Date;
  pending_at: Date | null;
  assigned_at: Date | null;
  started_at: Date | null;
  completed_at: Date | null;
}

/**
 * Inserts a job already queued: `submitted -> pending` happens inside the submission's transaction,
 * so no one ever sees it `submitted`; one statement instead of an insert and a move.
 */
export async function insertJob(
  db: Queryable,
  job: Pick<
    JobRow,
    | 'id'
    | 'org_id'
    | 'buyer_id'
    | 'kind'
    | 'execution_pool'
    | 'budget_cents'
    | 'max_price_micro_per_unit'
    | 'spec'
    | 'estimated_cost_micro'
    | 'estimated_duration_ms'
    | 'hold_id'
  >,
): Promise<JobRow> {
  const { rows } = await db.query<JobRow>(
    `INSERT INTO jobs (id, org_id, buyer_id, kind, status, execution_pool, budget_cents, max_price_micro_per_unit, spec,
                       estimated_cost_micro, estimated_duration_ms, hold_id, pending_at)
     VALUES ($1, $2, $3, $4, 'pending', $5, $6, $7, $8, $9, $10, $11, clock_timestamp()) RETURNING *`,
    [
      job.id,
      job.org_id,
      job.buyer_id,
      job.kind,
      job.execution_pool,
      job.budget_cents,
      job.max_price_micro_per_unit,
      JSON.stringify(job.spec),
      job.estimated_cost_micro,
      job.estimated_duration_ms,
      job.hold_id,
    ],
  );
  const row = rows[0];
  if (!row) throw new Error('job insert returned nothing');
  return row;
}

/** The job if it belongs to the organization (another organization's job does not exist for you). */
export async function findJob(db: Queryable, orgId: string, jobId: string, lock = false): Promise<JobRow | undefined> {
  const { rows } = await db.query<JobRow>(
    `SELECT * FROM jobs WHERE id = $1 AND org_id = $2 ${lock ? 'FOR UPDATE' : ''}`,
    [jobId, orgId],
  );
  return rows[0];
}

export async function findJobById(db: Queryable, jobId: string, lock = false): Promise<JobRow | undefined> {
  const { rows } = await db.query<JobRow>(`SELECT * FROM jobs WHERE id = $1 ${lock ? 'FOR UPDATE' : ''}`, [jobId]);
  return rows[0];
}

export async function listJobs(
  db: Queryable,
  orgId: string,
  q: { status?: JobStatus; limit: number; offset: number },
): Promise<{ rows: JobRow[]; total: number }> {
  const { rows } = await db.query<JobRow>(
    'SELECT * FROM jobs WHERE org_id = $1 AND ($2::text IS NULL OR status = $2) ORDER BY created_at DESC, id DESC LIMIT $3 OFFSET $4',
    [orgId, q.status ?? null, q.limit, q.offset],
  );
  const count = await db.query<{ total: number }>(
    'SELECT count(*)::int AS total FROM jobs WHERE org_id = $1 AND ($2::text IS NULL OR status = $2)',
    [orgId, q.status ?? null],
  );
  return { rows, total: count.rows[0]?.total ?? 0 };
}

/**
 * Moves a job to `to` if its current state allows it; returns the updated row, or undefined when
 * the job was not in a state that may move there (someone else moved it first).
 */
export async function moveJob(
  db: Queryable,
  jobId: string,
  to: JobStatus,
  set: Partial<Record<string, unknown>> = {},
): Promise<JobRow | undefined> {
  const timestamps: Partial<Record<JobStatus, string>> = {
    pending: 'pending_at',
    assigned: 'assigned_at',
    running: 'started_at',
    completed: 'completed_at',
    failed: 'completed_at',
    cancelled: 'completed_at',
  };
  const columns = Object.keys(set);
  if (columns.some((c) => !/^[a-z_]+$/.test(c))) throw new Error('moveJob: bad column name');
  const assignments = columns.map((c, i) => `${c} = $${i + 4}`);
  const stamp = timestamps[to];
  if (stamp) assignments.push(`${stamp} = clock_timestamp()`);
  const { rows } = await db.query<JobRow>(
    `UPDATE jobs SET status = $2 ${assignments.length ? `, ${assignments.join(', ')}` : ''} WHERE id = $1 AND status = ANY($3) RETURNING *`,
    [jobId, to, statesBefore(to), ...columns.map((c) => set[c])],
  );
  return rows[0];
}

export async function addJobEvent(
  db: Queryable,
  jobId: string,
  type: string,
  details: Record<string, unknown> = {},
): Promise<void> {
  await db.query('INSERT INTO job_events (job_id, type, details, at) VALUES ($1, $2, $3, clock_timestamp())', [
    jobId,
    type,
    JSON.stringify(details),
  ]);
}

export async function listJobEvents(
  db: Queryable,
  jobId: string,
): Promise<{ at: Date; type: string; details: Record<string, unknown> }[]> {
  const { rows } = await db.query<{ at: Date; type: string; details: Record<string, unknown> }>(
    'SELECT at, type, details FROM job_events WHERE job_id = $1 ORDER BY id',
    [jobId],
  );
  return rows;
}

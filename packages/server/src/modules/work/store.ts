import type { WorkTicketWire } from '@svc/protocol';
import type { Queryable } from '../../platform/db/index.js';

/**
 * The one owner of `work_items`: every statement that writes the table, and every read of it
 * but a few counting joins (see README.md), is here. The modules that own work, receipts and the
 * node channel call these functions; this module imports none of the modules that own work.
 */

/** Default lease length; `SVC_LEASE_SECONDS` overrides it. */
export const LEASE_SECONDS = 30;

/**
 * The SQL condition of direct work: leased straight to one node by its owner, which follows it
 * (every type but `job`; a job's attempt is claimed by its node instead).
 */
const DIRECT_WORK = "type <> 'job'";

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
  /**
   * Not a column: the ticket of direct work handed to its node before its owner's opening
   * committed (the owner's `rebuild` checks it). Work read from the store has none: its opening
   * is there.
   */
  ticket?: WorkTicketWire;
}

/** A work item's state as its owner follows it. */
export interface WorkState {
  status: WorkRow['status'];
  error: string | null;
  error_retryable: boolean | null;
}

/** A job's work, leased to a node that polls for it (`dispatched_at` set when it takes it). */
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
 * Direct work: leased straight to a node, handed out at its next poll (`dispatched_at` NULL until
 * then), or `dispatched` already: handed in memory to its poll waiting in this process. The lease
 * runs `lease_seconds` from now, or until `lease_expires_at` when the node was already told that.
 * `owner_id` (the id of the owner's row) is stored as the work's `job_id`.
 */
export async function insertLeasedWork(
  db: Queryable,
  w: {
    id: string;
    owner_id: string;
    org_id: string;
    node_id: string;
    type: string;
    model: string;
    payload: Record<string, unknown>;
    stream: boolean;
    lease_seconds: number;
    dispatched?: boolean;
    lease_expires_at?: Date;
  },
): Promise<WorkRow> {
  const { rows } = await db.query<WorkRow>(
    `INSERT INTO work_items (id, job_id, org_id, node_id, type, kind, model, payload, stream, status, lease_expires_at, dispatched_at)
     VALUES ($1, $2, $3, $4, $5, 0, $6, $7, $8, 'leased', COALESCE($11::timestamptz, now() + make_interval(secs => $9)), CASE WHEN $10::boolean THEN now() END) RETURNING *`,
    [
      w.id,
      w.owner_id,
      w.org_id,
      w.node_id,
      w.type,
      w.model,
      JSON.stringify(w.payload),
      w.stream,
      w.lease_seconds,
      w.dispatched ?? false,
      w.lease_expires_at ?? null,
    ],
  );
  const row = rows[0];
  if (!row) throw new Error('work insert returned nothing');
  return row;
}

/** The parameters $1 to $11 of the multi-row work inserts below: one array per column, in their order. */
function leasedWorkColumns(ws: readonly Parameters<typeof insertLeasedWork>[1][]): unknown[][] {
  return [
    ws.map((w) => w.id),
    ws.map((w) => w.owner_id),
    ws.map((w) => w.org_id),
    ws.map((w) => w.node_id),
    ws.map((w) => w.type),
    ws.map((w) => w.model),
    ws.map((w) => JSON.stringify(w.payload)),
    ws.map((w) => w.stream),
    ws.map((w) => w.lease_seconds),
    ws.map((w) => w.dispatched ?? false),
    ws.map((w) => w.lease_expires_at ?? null),
  ];
}

/** {@link insertLeasedWork} for many items of direct work in one statement. */
export async function insertLeasedWorks(
  db: Queryable,
  ws: readonly Parameters<typeof insertLeasedWork>[1][],
): Promise<void> {
  await db.query(
    `INSERT INTO work_items (id, job_id, org_id, node_id, type, kind, model, payload, stream, status, lease_expires_at, dispatched_at)
     SELECT id, job_id, org_id, node_id, type, 0, model, payload::jsonb, stream, 'leased',
            COALESCE(expires, now() + make_interval(secs => lease_seconds)), CASE WHEN dispatched THEN now() END
       FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::boolean[], $9::int[], $10::boolean[], $11::timestamptz[])
            AS v(id, job_id, org_id, node_id, type, model, payload, stream, lease_seconds, dispatched, expires)`,
    [...leasedWorkColumns(ws)],
  );
}

/**
 * {@link insertLeasedWorks} for direct work whose result and receipt come in the same
 * transaction (an owner's flush holding its opening and its completion): inserted `completed` with
 * its result, as the insert then {@link completeWorkWithResults} would leave it, in one statement.
 */
export async function insertCompletedWorks(
  db: Queryable,
  ws: readonly (Parameters<typeof insertLeasedWork>[1] & {
    result_hash: string;
    content_type: string;
    bytes: number;
    metering_units: number;
    usage?: Record<string, unknown>;
    /** The result's bytes when kept in the row (work/results.ts), else null: it is an object. */
    inline: Buffer | null;
  })[],
): Promise<number> {
  const { rowCount } = await db.query(
    `INSERT INTO work_items (id, job_id, org_id, node_id, type, kind, model, payload, stream, status, lease_expires_at, dispatched_at,
                             result_hash, result_content_type, result_bytes, metering_units, usage, result_inline)
     SELECT id, job_id, org_id, node_id, type, 0, model, payload::jsonb, stream, 'completed',
            COALESCE(expires, now() + make_interval(secs => lease_seconds)), CASE WHEN dispatched THEN now() END,
            result_hash, content_type, bytes, units, usage::jsonb, decode(inline_hex, 'hex')
       FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::boolean[], $9::int[], $10::boolean[], $11::timestamptz[],
                   $12::text[], $13::text[], $14::bigint[], $15::bigint[], $16::text[], $17::text[])
            AS v(id, job_id, org_id, node_id, type, model, payload, stream, lease_seconds, dispatched, expires, result_hash, content_type, bytes, units, usage, inline_hex)`,
    [
      ...leasedWorkColumns(ws),
      ws.map((w) => w.result_hash),
      ws.map((w) => w.content_type),
      ws.map((w) => w.bytes),
      ws.map((w) => w.metering_units),
      ws.map((w) => (w.usage ? JSON.stringify(w.usage) : null)),
      ws.map((w) => (w.inline ? w.inline.toString('hex') : null)),
    ],
  );
  return rowCount ?? 0;
}

/**
 * Hands out direct work already leased to this node but not yet sent to it, oldest first: marks it
 * dispatched and starts its lease now.
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

/** Each node's open work (leased or delivered) but the work ids in `except`, for nodes that have any: what routing weighs. */
export async function openWorkByNode(db: Queryable, except: readonly string[] = []): Promise<Map<string, number>> {
  const { rows } = await db.query<{ node_id: string; n: number }>(
    "SELECT node_id, count(*)::int AS n FROM work_items WHERE status IN ('leased', 'delivered') AND NOT (id = ANY($1::text[])) GROUP BY node_id",
    [except],
  );
  return new Map(rows.map((r) => [r.node_id, r.n]));
}

export async function countOpenWork(db: Queryable, nodeId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM work_items WHERE node_id = $1 AND status IN ('leased', 'delivered')",
    [nodeId],
  );
  return rows[0]?.n ?? 0;
}

/**
 * Direct work leased to a node taken for gone: each lease ends within `seconds` unless it already
 * ends sooner (`LEAST`), so the sweep marks it `lost` and its owner, which follows it, moves on
 * (another node). A node that reconnects heartbeats its work at once and renews the leases; a poll
 * that takes work not yet taken renews its lease too. Jobs keep theirs. `untakenOnly`: only the
 * work the node never took (`dispatched_at` NULL). Returns how many leases were shortened.
 */
export async function shortenDirectLeases(
  db: Queryable,
  nodeId: string,
  seconds: number,
  options: { untakenOnly?: boolean } = {},
): Promise<number> {
  const { rowCount } = await db.query(
    `UPDATE work_items SET lease_expires_at = LEAST(lease_expires_at, now() + make_interval(secs => $2)), updated_at = now()
      WHERE node_id = $1 AND ${DIRECT_WORK} AND status IN ('leased', 'delivered')
        AND ($3::boolean IS NOT TRUE OR dispatched_at IS NULL)`,
    [nodeId, seconds, options.untakenOnly === true],
  );
  return rowCount;
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
  // Nor is work the store has no row for: direct work handed over before its owner's opening
  // committed, whose opening was lost (the instance died): the node's receipt, with the work's
  // ticket, rebuilds it, so the node must keep it (a node told to stop drops its signed receipt).
  const { rows: known } = await db.query<{ id: string; node_id: string; status: WorkRow['status'] }>(
    'SELECT id, node_id, status FROM work_items WHERE id = ANY($1)',
    [rest],
  );
  const gone = known
    .filter((r) => r.node_id !== nodeId || (r.status !== 'completed' && r.status !== 'failed'))
    .map((r) => r.id);
  return { renewed, gone: rest.filter((id) => gone.includes(id)) };
}

/**
 * Of `workIds`, this node's attempts of direct work whose lease lapsed (`lost`) before any
 * receipt: when their owner takes lapsed attempts, a receipt for one is still taken while the
 * owner runs on it (intake.ts), so the node must not be told to drop it
 * (`DirectCompletion.lapsedStillOpen` decides which).
 */
export async function lapsedAttempts(
  db: Queryable,
  nodeId: string,
  workIds: string[],
): Promise<{ id: string; job_id: string }[]> {
  if (workIds.length === 0) return [];
  const { rows } = await db.query<{ id: string; job_id: string }>(
    `SELECT w.id, w.job_id FROM work_items w
      WHERE w.id = ANY($1) AND w.node_id = $2 AND w.status = 'lost' AND ${DIRECT_WORK}
        AND NOT EXISTS (SELECT 1 FROM receipts r WHERE r.work_id = w.id)`,
    [workIds, nodeId],
  );
  return rows;
}

/**
 * This node's attempts of direct work whose lease lapsed (`lost`) and that its heartbeat does not
 * list (`listed`: what it runs, has queued, or holds an unacknowledged receipt of): the node holds
 * no receipt for them, so none will come. They become `failed` (not retryable), so that an owner
 * no live instance follows can end. Returns their ids.
 */
export async function failUnlistedLapsed(db: Queryable, nodeId: string, listed: string[]): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    `UPDATE work_items SET status = 'failed', error = $3, error_retryable = false, updated_at = now()
      WHERE node_id = $1 AND status = 'lost' AND ${DIRECT_WORK} AND NOT (id = ANY($2)) RETURNING id`,
    [nodeId, listed, UNLISTED_LAPSED],
  );
  return rows.map((r) => r.id);
}

/**
 * Of the listed work, the items that failed more than `olderThanSeconds` ago (the node reported
 * the failure, or its lease lapsed and its node no longer held it: {@link failUnlistedLapsed}).
 */
export async function failedWorkAmong(db: Queryable, workIds: string[], olderThanSeconds: number): Promise<string[]> {
  if (workIds.length === 0) return [];
  const { rows } = await db.query<{ id: string }>(
    "SELECT id FROM work_items WHERE id = ANY($1) AND status = 'failed' AND updated_at < now() - make_interval(secs => $2)",
    [workIds, olderThanSeconds],
  );
  return rows.map((r) => r.id);
}

/** The error of a lapsed attempt of direct work its node's heartbeat no longer listed. */
export const UNLISTED_LAPSED = 'its lease lapsed and its node holds no result for it';

/** Of the listed work, the items that run a job (not direct work), with their job. */
export async function jobWorkAmong(db: Queryable, workIds: string[]): Promise<{ job_id: string; id: string }[]> {
  const { rows } = await db.query<{ job_id: string; id: string }>(
    "SELECT job_id, id FROM work_items WHERE id = ANY($1) AND type = 'job'",
    [workIds],
  );
  return rows;
}

export async function findWork(db: Queryable, workId: string, lock = false): Promise<WorkRow | undefined> {
  const { rows } = await db.query<WorkRow>(`SELECT * FROM work_items WHERE id = $1 ${lock ? 'FOR UPDATE' : ''}`, [
    workId,
  ]);
  return rows[0];
}

export async function workState(db: Queryable, workId: string, lock = false): Promise<WorkState | undefined> {
  const { rows } = await db.query<WorkState>(
    `SELECT status, error, error_retryable FROM work_items WHERE id = $1 ${lock ? 'FOR UPDATE' : ''}`,
    [workId],
  );
  return rows[0];
}

/**
 * The latest work for `jobId` leased to `nodeId`, locked, and whether a receipt already exists for
 * it: what a receipt submission checks first, in one statement (it reads `receipts`, never writes it).
 */
export async function lockWorkForReceipt(
  db: Queryable,
  jobId: string,
  nodeId: string,
): Promise<(WorkRow & { has_receipt: boolean }) | undefined> {
  const { rows } = await db.query<WorkRow & { has_receipt: boolean }>(
    `SELECT w.*, EXISTS (SELECT 1 FROM receipts r WHERE r.work_id = w.id) AS has_receipt
       FROM work_items w WHERE w.job_id = $1 AND w.node_id = $2 ORDER BY w.created_at DESC LIMIT 1 FOR UPDATE OF w`,
    [jobId, nodeId],
  );
  return rows[0];
}

/**
 * Every work row of `jobIds`, locked, with whether a receipt exists for it: what
 * {@link lockWorkForReceipt} reads, for many receipts in one statement (the caller picks each
 * receipt's row: the latest of its job on its node).
 */
export async function lockWorkOfJobs(
  db: Queryable,
  jobIds: readonly string[],
): Promise<(WorkRow & { has_receipt: boolean; created_at: Date })[]> {
  const { rows } = await db.query<WorkRow & { has_receipt: boolean; created_at: Date }>(
    `SELECT w.*, EXISTS (SELECT 1 FROM receipts r WHERE r.work_id = w.id) AS has_receipt
       FROM work_items w WHERE w.job_id = ANY($1::text[]) ORDER BY w.id FOR UPDATE OF w`,
    [jobIds],
  );
  return rows;
}

/**
 * {@link storeWorkResult} with status `completed` for many leased work items without a result, in
 * one statement. Returns how many rows it changed.
 */
export async function completeWorkWithResults(
  db: Queryable,
  results: readonly {
    workId: string;
    result_hash: string;
    content_type: string;
    bytes: number;
    metering_units: number;
    usage?: Record<string, unknown>;
    /** The result's bytes when kept in the row (work/results.ts), else null: it is an object. */
    inline: Buffer | null;
  }[],
): Promise<number> {
  const { rowCount } = await db.query(
    `UPDATE work_items SET status = 'completed', result_hash = v.result_hash, result_content_type = v.content_type,
            result_bytes = v.bytes, metering_units = v.units, usage = v.usage::jsonb,
            result_inline = decode(v.inline_hex, 'hex'), updated_at = now()
       FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::text[], $7::text[]) AS v(id, result_hash, content_type, bytes, units, usage, inline_hex)
      WHERE work_items.id = v.id AND work_items.id = ANY($1::text[]) AND work_items.status = 'leased' AND work_items.result_hash IS NULL`,
    [
      results.map((r) => r.workId),
      results.map((r) => r.result_hash),
      results.map((r) => r.content_type),
      results.map((r) => r.bytes),
      results.map((r) => r.metering_units),
      results.map((r) => (r.usage ? JSON.stringify(r.usage) : null)),
      results.map((r) => (r.inline ? r.inline.toString('hex') : null)),
    ],
  );
  return rowCount ?? 0;
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

/**
 * Records the result of leased work that has none yet (its bytes are stored apart, by the
 * caller) and moves it to `status`. False when the work was no longer leased without a result.
 * With `lapsedTaken` (its owner takes lapsed attempts: `WorkCompletion.takesLapsed`), an attempt
 * whose lease lapsed (`lost`) takes its result too: its receipt is taken only while the owner
 * still runs on this attempt (the owner's `lockOwner`, in the receipt's transaction).
 */
export async function storeWorkResult(
  db: Queryable,
  workId: string,
  result: {
    result_hash: string;
    content_type: string;
    bytes: number;
    metering_units: number;
    usage?: Record<string, unknown>;
    status: 'delivered' | 'completed';
    /** The result's bytes when kept in the row (work/results.ts), else null: it is an object. */
    inline: Buffer | null;
    lapsedTaken?: boolean;
  },
): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE work_items SET status = $7, result_hash = $2, result_content_type = $3, result_bytes = $4, metering_units = $5, usage = $6,
            result_inline = decode($8::text, 'hex'), updated_at = now()
      WHERE id = $1 AND result_hash IS NULL AND (status = 'leased' OR (status = 'lost' AND $9::boolean))`,
    [
      workId,
      result.result_hash,
      result.content_type,
      result.bytes,
      result.metering_units,
      result.usage ? JSON.stringify(result.usage) : null,
      result.status,
      result.inline ? result.inline.toString('hex') : null,
      result.lapsedTaken ?? false,
    ],
  );
  return rowCount === 1;
}

/**
 * A work item's result kept in its row (work/results.ts), with its content type; `bytes` null when
 * the result is an object or there is none; undefined when there is no such work item.
 */
export async function findWorkResultInline(
  db: Queryable,
  workId: string,
): Promise<{ bytes: Buffer | null; contentType: string | null } | undefined> {
  const { rows } = await db.query<{ result_inline: Uint8Array | null; result_content_type: string | null }>(
    'SELECT result_inline, result_content_type FROM work_items WHERE id = $1',
    [workId],
  );
  const row = rows[0];
  if (!row) return undefined;
  const raw = row.result_inline;
  const bytes =
    raw === null ? null : Buffer.isBuffer(raw) ? raw : Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
  return { bytes, contentType: row.result_content_type };
}

/** Records why a node failed the work (its message, and whether another node may retry), for its owner to read. */
export async function noteWorkFailure(
  db: Queryable,
  workId: string,
  message: string,
  retryable: boolean,
): Promise<void> {
  await db.query('UPDATE work_items SET error = $2, error_retryable = $3 WHERE id = $1', [workId, message, retryable]);
}

/**
 * Cancels open work: the node's next heartbeat (or events call) tells it to stop. `reason`, when
 * given, becomes the work's error; without it the error stays as it was. False when the work was
 * no longer open.
 */
export async function cancelOpenWork(db: Queryable, workId: string, reason?: string): Promise<boolean> {
  const { rowCount } = await db.query(
    "UPDATE work_items SET status = 'cancelled', error = COALESCE($2, error), updated_at = now() WHERE id = $1 AND status IN ('leased', 'delivered')",
    [workId, reason ?? null],
  );
  return rowCount === 1;
}

import type { Queryable } from '../../platform/db/index.js';
import type { GatewayType } from './pricing.js';

export type GatewayStatus = 'running' | 'completed' | 'failed' | 'cancelled' | 'timeout';

export interface GatewayRequestRow {
  id: string;
  org_id: string;
  buyer_id: string;
  type: GatewayType;
  model: string;
  stream: boolean;
  node_id: string | null;
  work_id: string | null;
  hold_id: string | null;
  status: GatewayStatus;
  usage: Record<string, number> | null;
  charged_cents: number | null;
  charged_micro: number | null;
  receipt_id: string | null;
  error: string | null;
  metadata: Record<string, unknown>;
  created_at: Date;
  completed_at: Date | null;
}

export async function insertGatewayRequest(
  db: Queryable,
  r: Pick<
    GatewayRequestRow,
    'id' | 'org_id' | 'buyer_id' | 'type' | 'model' | 'stream' | 'node_id' | 'work_id' | 'hold_id' | 'metadata'
  > & { created_at?: Date },
): Promise<boolean> {
  // created_at: the instant its evidence's opening events are stamped with (evidence-derived.ts), else now.
  const { rowCount } = await db.query(
    `INSERT INTO gateway_requests (id, org_id, buyer_id, type, model, stream, node_id, work_id, hold_id, metadata, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, COALESCE($11::timestamptz, now())) ON CONFLICT (id) DO NOTHING`,
    [
      r.id,
      r.org_id,
      r.buyer_id,
      r.type,
      r.model,
      r.stream,
      r.node_id,
      r.work_id,
      r.hold_id,
      JSON.stringify(r.metadata),
      r.created_at ?? null,
    ],
  );
  return rowCount === 1;
}

type OpenedRequest = Pick<
  GatewayRequestRow,
  | 'id'
  | 'org_id'
  | 'buyer_id'
  | 'type'
  | 'model'
  | 'stream'
  | 'node_id'
  | 'work_id'
  | 'hold_id'
  | 'metadata'
  | 'created_at'
>;

/** The parameters $1 to $10 of the multi-row request inserts below: one array per column, in their order. */
function openedRequestColumns(rs: readonly OpenedRequest[]): unknown[][] {
  return [
    rs.map((r) => r.id),
    rs.map((r) => r.org_id),
    rs.map((r) => r.buyer_id),
    rs.map((r) => r.type),
    rs.map((r) => r.model),
    rs.map((r) => r.stream),
    rs.map((r) => r.node_id),
    rs.map((r) => r.work_id),
    rs.map((r) => r.hold_id),
    rs.map((r) => JSON.stringify(r.metadata)),
    rs.map((r) => r.created_at.toISOString()),
  ];
}

/** {@link insertGatewayRequest} for many requests in one statement; the ids of those inserted (not already there). */
export async function insertGatewayRequests(db: Queryable, rs: readonly OpenedRequest[]): Promise<Set<string>> {
  const { rows } = await db.query<{ id: string }>(
    `INSERT INTO gateway_requests (id, org_id, buyer_id, type, model, stream, node_id, work_id, hold_id, metadata, created_at)
     SELECT id, org_id, buyer_id, type, model, stream, node_id, work_id, hold_id, metadata::jsonb, created_at::timestamptz
       FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::boolean[], $7::text[], $8::text[], $9::text[], $10::text[], $11::text[])
            AS v(id, org_id, buyer_id, type, model, stream, node_id, work_id, hold_id, metadata, created_at)
     ON CONFLICT (id) DO NOTHING RETURNING id`,
    [...openedRequestColumns(rs)],
  );
  return new Set(rows.map((r) => r.id));
}

/**
 * {@link insertGatewayRequests} for requests completed by their receipts in the same transaction
 * (a flush holding a request's opening and its completion): inserted `completed`, as the insert
 * then {@link completeGatewayRequests} would leave them, in one statement. How many it inserted
 * (one already stored is left as it is).
 */
export async function insertCompletedGatewayRequests(
  db: Queryable,
  rs: readonly (OpenedRequest & {
    usage: Record<string, number>;
    charged_cents: number;
    charged_micro: number;
    receipt_id: string;
    completed_at: Date;
  })[],
): Promise<number> {
  const { rowCount } = await db.query(
    `INSERT INTO gateway_requests (id, org_id, buyer_id, type, model, stream, node_id, work_id, hold_id, metadata, created_at,
                                   status, usage, charged_cents, charged_micro, receipt_id, completed_at)
     SELECT id, org_id, buyer_id, type, model, stream, node_id, work_id, hold_id, metadata::jsonb, created_at::timestamptz,
            'completed', usage::jsonb, cents, micro, receipt_id, completed_at::timestamptz
       FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::boolean[], $7::text[], $8::text[], $9::text[], $10::text[], $11::text[],
                   $12::text[], $13::bigint[], $14::bigint[], $15::text[], $16::text[])
            AS v(id, org_id, buyer_id, type, model, stream, node_id, work_id, hold_id, metadata, created_at, usage, cents, micro, receipt_id, completed_at)
     ON CONFLICT (id) DO NOTHING`,
    [
      ...openedRequestColumns(rs),
      rs.map((r) => JSON.stringify(r.usage)),
      rs.map((r) => r.charged_cents),
      rs.map((r) => r.charged_micro),
      rs.map((r) => r.receipt_id),
      rs.map((r) => r.completed_at.toISOString()),
    ],
  );
  return rowCount ?? 0;
}

export async function findGatewayRequest(
  db: Queryable,
  id: string,
  lock = false,
): Promise<GatewayRequestRow | undefined> {
  const { rows } = await db.query<GatewayRequestRow>(
    `SELECT * FROM gateway_requests WHERE id = $1 ${lock ? 'FOR UPDATE' : ''}`,
    [id],
  );
  return rows[0];
}

/** The requests of `ids`, locked (one statement for a flush of receipts), by id. */
export async function lockGatewayRequests(
  db: Queryable,
  ids: readonly string[],
): Promise<Map<string, GatewayRequestRow>> {
  const { rows } = await db.query<GatewayRequestRow>(
    'SELECT * FROM gateway_requests WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE',
    [ids],
  );
  return new Map(rows.map((r) => [r.id, r]));
}

/** Replaces the request's metadata (evidence-derived.ts: its events now stored as rows). */
export async function setRequestMetadata(db: Queryable, id: string, metadata: Record<string, unknown>): Promise<void> {
  await db.query('UPDATE gateway_requests SET metadata = $2 WHERE id = $1', [id, JSON.stringify(metadata)]);
}

/** Points the request at a new attempt. */
export async function setAttempt(
  db: Queryable,
  id: string,
  attempt: { node_id: string; work_id: string; metadata: Record<string, unknown> },
): Promise<void> {
  await db.query('UPDATE gateway_requests SET node_id = $2, work_id = $3, metadata = $4 WHERE id = $1', [
    id,
    attempt.node_id,
    attempt.work_id,
    JSON.stringify(attempt.metadata),
  ]);
}

/** {@link closeGatewayRequest} for many running requests, completed by their receipts, in one statement; how many it closed. */
export async function completeGatewayRequests(
  db: Queryable,
  ends: readonly {
    id: string;
    usage: Record<string, number>;
    charged_cents: number;
    charged_micro: number;
    receipt_id: string;
    completed_at: Date;
  }[],
): Promise<number> {
  const { rowCount } = await db.query(
    `UPDATE gateway_requests SET status = 'completed', usage = v.usage::jsonb, charged_cents = v.cents, receipt_id = v.receipt_id,
            error = NULL, charged_micro = v.micro, completed_at = v.completed_at::timestamptz
       FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::bigint[], $6::text[]) AS v(id, usage, cents, receipt_id, micro, completed_at)
      WHERE gateway_requests.id = v.id AND gateway_requests.id = ANY($1::text[]) AND gateway_requests.status = 'running'`,
    [
      ends.map((e) => e.id),
      ends.map((e) => JSON.stringify(e.usage)),
      ends.map((e) => e.charged_cents),
      ends.map((e) => e.receipt_id),
      ends.map((e) => e.charged_micro),
      ends.map((e) => e.completed_at.toISOString()),
    ],
  );
  return rowCount ?? 0;
}

/** Closes a running request; false when it was already closed (someone else finished it first). */
export async function closeGatewayRequest(
  db: Queryable,
  id: string,
  end: {
    status: Exclude<GatewayStatus, 'running'>;
    usage: Record<string, number> | null;
    charged_cents: number;
    charged_micro?: number;
    receipt_id?: string | null;
    error?: string | null;
    /** The instant its closing evidence events are stamped with (evidence-derived.ts), else now. */
    completed_at?: Date;
  },
): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE gateway_requests SET status = $2, usage = $3, charged_cents = $4, receipt_id = $5, error = $6, charged_micro = $7,
            completed_at = COALESCE($8::timestamptz, now())
      WHERE id = $1 AND status = 'running'`,
    [
      id,
      end.status,
      end.usage ? JSON.stringify(end.usage) : null,
      end.charged_cents,
      end.receipt_id ?? null,
      end.error ?? null,
      end.charged_micro ?? end.charged_cents * 10_000,
      end.completed_at ?? null,
    ],
  );
  return rowCount === 1;
}

/** Requests still running long after any request may run: their instance stopped mid-way. */
export async function staleRequests(db: Queryable, olderThanSeconds: number, limit: number): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    "SELECT id FROM gateway_requests WHERE status = 'running' AND created_at < now() - make_interval(secs => $1) ORDER BY created_at LIMIT $2",
    [olderThanSeconds, limit],
  );
  return rows.map((r) => r.id);
}

/** Of `works` (attempts, with their request as `job_id`), those whose request still runs on them. */
export async function requestsStillOn(
  db: Queryable,
  works: readonly { id: string; job_id: string }[],
): Promise<string[]> {
  if (works.length === 0) return [];
  const { rows } = await db.query<{ work_id: string }>(
    "SELECT work_id FROM gateway_requests WHERE id = ANY($1::text[]) AND work_id = ANY($2::text[]) AND status = 'running'",
    [works.map((w) => w.job_id), works.map((w) => w.id)],
  );
  return rows.map((r) => r.work_id);
}

/** Requests running for more than `olderThanSeconds`, oldest first, with their current attempt's work. */
export async function runningRequests(
  db: Queryable,
  olderThanSeconds: number,
  limit: number,
): Promise<{ id: string; work_id: string | null }[]> {
  const { rows } = await db.query<{ id: string; work_id: string | null }>(
    "SELECT id, work_id FROM gateway_requests WHERE status = 'running' AND created_at < now() - make_interval(secs => $1) ORDER BY created_at LIMIT $2",
    [olderThanSeconds, limit],
  );
  return rows;
}

/** One page of an organization's gateway requests, newest first, with the serving node's country. */
export async function listGatewayRequests(
  db: Queryable,
  orgId: string,
  page: { limit: number; offset: number; status?: GatewayStatus },
): Promise<{ rows: (GatewayRequestRow & { country: string | null })[]; total: number }> {
  const [{ rows }, count] = await Promise.all([
    db.query<GatewayRequestRow & { country: string | null }>(
      `SELECT g.*, n.country FROM gateway_requests g LEFT JOIN nodes n ON n.id = g.node_id
        WHERE g.org_id = $1 AND ($2::text IS NULL OR g.status = $2)
        ORDER BY g.created_at DESC, g.id DESC LIMIT $3 OFFSET $4`,
      [orgId, page.status ?? null, page.limit, page.offset],
    ),
    db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM gateway_requests WHERE org_id = $1 AND ($2::text IS NULL OR status = $2)',
      [orgId, page.status ?? null],
    ),
  ]);
  return { rows, total: count.rows[0]?.n ?? 0 };
}

/** One of an organization's gateway requests with the serving node's country; undefined for another organization's. */
export async function findOrgGatewayRequest(
  db: Queryable,
  orgId: string,
  id: string,
): Promise<(GatewayRequestRow & { country: string | null }) | undefined> {
  const { rows } = await db.query<GatewayRequestRow & { country: string | null }>(
    'SELECT g.*, n.country FROM gateway_requests g LEFT JOIN nodes n ON n.id = g.node_id WHERE g.org_id = $1 AND g.id = $2',
    [orgId, id],
  );
  return rows[0];
}

/**
 * The gateway requests of these work items, locked, by work id: only those whose request still
 * runs on that work (the plain case of a flush's receipts; any other is applied one by one).
 */
export async function lockRunningRequests(
  tx: Queryable,
  works: readonly { id: string; job_id: string }[],
): Promise<Map<string, GatewayRequestRow>> {
  const requests = await lockGatewayRequests(
    tx,
    works.map((w) => w.job_id),
  );
  const running = new Map<string, GatewayRequestRow>();
  for (const work of works) {
    const request = requests.get(work.job_id);
    if (request && request.work_id === work.id && request.status === 'running') running.set(work.id, request);
  }
  return running;
}

import type { Queryable } from '../../platform/db/index.js';
import { pendingLeavesFrom } from '../log/store.js';

export type RunStatus = 'open' | 'signed';

export interface RunRow {
  id: string;
  org_id: string;
  buyer_id: string | null;
  subject_type: 'job' | 'request' | 'work_order' | 'capture_set';
  job_id: string;
  status: RunStatus;
  summary: string;
  jurisdiction: string | null;
  policy_id: string;
  trust_tier: string;
  work_type: string;
  event_count: number;
  last_event_id: string | null;
  root_hash: string | null;
  root_signature_hex: string | null;
  signer_public_key_hex: string | null;
  signer_key_id: string | null;
  created_at: Date;
  updated_at: Date;
  signed_at: Date | null;
}

export interface EventRow {
  id: string;
  run_id: string;
  sequence: number;
  event_type: string;
  subject_id: string;
  summary: string;
  /** JSON text, exactly as hashed. */
  metadata: string;
  /** ISO 8601 with milliseconds, exactly as hashed. */
  created_at: string;
  event_hash: string;
  /**
   * Its incoming edges, as its hash covers them (`parents`): JSON text of `{event_id, edge_type}`
   * ordered by the parent's sequence, then the edge type (migrations/0170_evidence_parents.sql).
   */
  parents: string;
}

export type EdgeType = 'then' | 'caused_by';

/** One edge of a run's graph as the API shows it, read from its `to` event's `parents`. */
export interface EdgeRow {
  run_id: string;
  from_event_id: string;
  to_event_id: string;
  edge_type: EdgeType;
}

export type NewRun = Pick<
  RunRow,
  | 'id'
  | 'org_id'
  | 'buyer_id'
  | 'subject_type'
  | 'job_id'
  | 'summary'
  | 'jurisdiction'
  | 'policy_id'
  | 'trust_tier'
  | 'work_type'
>;

/** Placeholders and parameters for a multi-row VALUES list, numbered after `params`' current length. */
function values(params: unknown[], rows: readonly (readonly unknown[])[]): string {
  return rows
    .map((row) => {
      const base = params.length;
      params.push(...row);
      return `(${row.map((_, i) => `$${base + i + 1}`).join(', ')})`;
    })
    .join(', ');
}

/**
 * The `WITH` part inserting events (with their edges, in `parents`), for one statement: a run's
 * writes then cost one round trip (the foreign key is checked at the end of the statement, when
 * the run exists).
 */
function eventInserts(params: unknown[], events: readonly EventRow[]): string {
  return `ev AS (INSERT INTO evidence_events (id, run_id, sequence, event_type, subject_id, summary, metadata, created_at, event_hash, parents) VALUES ${values(
    params,
    events.map((e) => [
      e.id,
      e.run_id,
      e.sequence,
      e.event_type,
      e.subject_id,
      e.summary,
      e.metadata,
      e.created_at,
      e.event_hash,
      e.parents,
    ]),
  )})`;
}

/** Creates a run with its first events, in one statement. */
export async function insertRunWithEvents(db: Queryable, run: NewRun, events: readonly EventRow[]): Promise<void> {
  const last = events[events.length - 1];
  const params: unknown[] = [];
  const runRow = values(params, [
    [
      run.id,
      run.org_id,
      run.buyer_id,
      run.subject_type,
      run.job_id,
      run.summary,
      run.jurisdiction,
      run.policy_id,
      run.trust_tier,
      run.work_type,
      last?.sequence ?? 0,
      last?.id ?? null,
    ],
  ]);
  const insertRun = `INSERT INTO evidence_runs (id, org_id, buyer_id, subject_type, job_id, summary, jurisdiction, policy_id, trust_tier, work_type, event_count, last_event_id) VALUES ${runRow}`;
  if (events.length === 0) {
    await db.query(insertRun, params);
    return;
  }
  await db.query(`WITH run AS (${insertRun}), ${eventInserts(params, events)} SELECT 1`, params);
}

/**
 * The 10 array parameters of a batch's events, one per column as `evidence_events` takes them:
 * the `unnest` inputs of the batch statements below.
 */
function eventColumns(events: readonly EventRow[]): unknown[][] {
  return [
    events.map((e) => e.id),
    events.map((e) => e.run_id),
    events.map((e) => e.sequence),
    events.map((e) => e.event_type),
    events.map((e) => e.subject_id),
    events.map((e) => e.summary),
    events.map((e) => e.metadata),
    events.map((e) => e.created_at),
    events.map((e) => e.event_hash),
    events.map((e) => e.parents),
  ];
}

/** {@link insertRunWithEvents} for many runs in one statement (the events of all of them in arrays). */
export async function insertRunsWithEvents(
  db: Queryable,
  runs: readonly NewRun[],
  events: readonly EventRow[],
): Promise<void> {
  const last = new Map<string, EventRow>();
  for (const e of events) last.set(e.run_id, e);
  await db.query(
    `WITH run AS (INSERT INTO evidence_runs (id, org_id, buyer_id, subject_type, job_id, summary, jurisdiction, policy_id, trust_tier, work_type, event_count, last_event_id)
                  SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::int[], $12::text[]))
     INSERT INTO evidence_events (id, run_id, sequence, event_type, subject_id, summary, metadata, created_at, event_hash, parents)
     SELECT * FROM unnest($13::text[], $14::text[], $15::int[], $16::text[], $17::text[], $18::text[], $19::text[], $20::text[], $21::text[], $22::text[])`,
    [
      ...derivedRunColumns(
        runs.map((r) => ({
          ...r,
          event_count: last.get(r.id)?.sequence ?? 0,
          last_event_id: last.get(r.id)?.id ?? null,
          root_hash: '',
        })),
      ),
      ...eventColumns(events),
    ],
  );
}

/** A run of {@link insertSignedRunsWithEvents}: as it is created, with its counters and signature once every event is in. */
export type SignedRun = NewRun & { event_count: number; last_event_id: string | null; signed: Signature };

/**
 * Creates runs with every event and their signature in one statement (a flush
 * holding a request's opening and its completion: {@link insertRunsWithEvents} then
 * {@link appendAndSignMany} in one). A run is inserted signed provided its `signer_key_id` is
 * still the active platform key (another process may have rotated it), else open, with its
 * events: returns the ids of the runs left open, for the caller to sign with the new key.
 */
export async function insertSignedRunsWithEvents(
  db: Queryable,
  runs: readonly SignedRun[],
  events: readonly EventRow[],
): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    `WITH k AS (SELECT key_id FROM platform_keys WHERE valid_until IS NULL),
          run AS (INSERT INTO evidence_runs (id, org_id, buyer_id, subject_type, job_id, summary, jurisdiction, policy_id, trust_tier, work_type, event_count, last_event_id,
                                             status, root_hash, root_signature_hex, signer_public_key_hex, signer_key_id, signed_at)
                  SELECT v.id, v.org_id, v.buyer_id, v.subject_type, v.job_id, v.summary, v.jurisdiction, v.policy_id, v.trust_tier, v.work_type, v.event_count, v.last_event_id,
                         CASE WHEN k.key_id IS NULL THEN 'open' ELSE 'signed' END,
                         CASE WHEN k.key_id IS NULL THEN NULL ELSE v.root_hash END,
                         CASE WHEN k.key_id IS NULL THEN NULL ELSE v.root_signature_hex END,
                         CASE WHEN k.key_id IS NULL THEN NULL ELSE v.signer_public_key_hex END,
                         CASE WHEN k.key_id IS NULL THEN NULL ELSE v.signer_key_id END,
                         CASE WHEN k.key_id IS NULL THEN NULL ELSE now() END
                    FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::int[], $12::text[],
                                $13::text[], $14::text[], $15::text[], $16::text[])
                         AS v(id, org_id, buyer_id, subject_type, job_id, summary, jurisdiction, policy_id, trust_tier, work_type, event_count, last_event_id,
                              root_hash, root_signature_hex, signer_public_key_hex, signer_key_id)
                    LEFT JOIN k ON k.key_id = v.signer_key_id
                  RETURNING id, status, org_id, subject_type, job_id, root_hash, event_count, signed_at),
          lg AS (${pendingLeavesFrom("run WHERE status = 'signed'")}),
          ev AS (INSERT INTO evidence_events (id, run_id, sequence, event_type, subject_id, summary, metadata, created_at, event_hash, parents)
                 SELECT * FROM unnest($17::text[], $18::text[], $19::int[], $20::text[], $21::text[], $22::text[], $23::text[], $24::text[], $25::text[], $26::text[]))
     SELECT id FROM run WHERE status = 'open'`,
    [
      runs.map((r) => r.id),
      runs.map((r) => r.org_id),
      runs.map((r) => r.buyer_id),
      runs.map((r) => r.subject_type),
      runs.map((r) => r.job_id),
      runs.map((r) => r.signed.summary),
      runs.map((r) => r.jurisdiction),
      runs.map((r) => r.policy_id),
      runs.map((r) => r.trust_tier),
      runs.map((r) => r.work_type),
      runs.map((r) => r.event_count),
      runs.map((r) => r.last_event_id),
      runs.map((r) => r.signed.root_hash),
      runs.map((r) => r.signed.root_signature_hex),
      runs.map((r) => r.signed.signer_public_key_hex),
      runs.map((r) => r.signed.signer_key_id),
      ...eventColumns(events),
    ],
  );
  return rows.map((r) => r.id);
}

/** The open run of a subject, locked so that appends to one run are serialised. */
export async function lockOpenRun(
  db: Queryable,
  subjectId: string,
): Promise<Pick<RunRow, 'id' | 'event_count' | 'last_event_id'> | undefined> {
  const { rows } = await db.query<Pick<RunRow, 'id' | 'event_count' | 'last_event_id'>>(
    "SELECT id, event_count, last_event_id FROM evidence_runs WHERE job_id = $1 AND status = 'open' FOR UPDATE",
    [subjectId],
  );
  return rows[0];
}

/** {@link lockOpenRun}, with the hashes of the run's events in order (to sign it). */
export async function lockOpenRunWithHashes(
  db: Queryable,
  subjectId: string,
): Promise<(Pick<RunRow, 'id' | 'event_count' | 'last_event_id'> & { hashes: string[] }) | undefined> {
  const { rows } = await db.query<Pick<RunRow, 'id' | 'event_count' | 'last_event_id'> & { hashes: string[] }>(
    `SELECT r.id, r.event_count, r.last_event_id, ARRAY(SELECT e.event_hash FROM evidence_events e WHERE e.run_id = r.id ORDER BY e.sequence) AS hashes
       FROM evidence_runs r WHERE r.job_id = $1 AND r.status = 'open' FOR UPDATE OF r`,
    [subjectId],
  );
  return rows[0];
}

/** {@link lockOpenRunWithHashes} for many subjects in one statement: the open runs found, by subject. */
export async function lockOpenRunsWithHashes(
  db: Queryable,
  subjectIds: readonly string[],
): Promise<Map<string, Pick<RunRow, 'id' | 'event_count' | 'last_event_id'> & { hashes: string[] }>> {
  const { rows } = await db.query<
    Pick<RunRow, 'id' | 'job_id' | 'event_count' | 'last_event_id'> & { hashes: string[] }
  >(
    `SELECT r.id, r.job_id, r.event_count, r.last_event_id, ARRAY(SELECT e.event_hash FROM evidence_events e WHERE e.run_id = r.id ORDER BY e.sequence) AS hashes
       FROM evidence_runs r WHERE r.job_id = ANY($1::text[]) AND r.status = 'open' ORDER BY r.id FOR UPDATE OF r`,
    [subjectIds],
  );
  return new Map(rows.map(({ job_id, ...run }) => [job_id, run]));
}

/** {@link latestEventsOfTypes} for many runs in one statement, by run id. */
export async function latestEventsOfTypesMany(
  db: Queryable,
  runIds: readonly string[],
  types: readonly string[],
): Promise<Map<string, Map<string, { id: string; sequence: number }>>> {
  const { rows } = await db.query<{ run_id: string; id: string; event_type: string; sequence: number }>(
    `SELECT DISTINCT ON (run_id, event_type) run_id, id, event_type, sequence FROM evidence_events
      WHERE run_id = ANY($1::text[]) AND event_type = ANY($2::text[]) ORDER BY run_id, event_type, sequence DESC`,
    [runIds, types],
  );
  const out = new Map<string, Map<string, { id: string; sequence: number }>>();
  for (const r of rows) {
    const run = out.get(r.run_id) ?? new Map<string, { id: string; sequence: number }>();
    run.set(r.event_type, { id: r.id, sequence: r.sequence });
    out.set(r.run_id, run);
  }
  return out;
}

/** The latest event of each of `types` in a run (for `caused_by` edges to earlier batches). */
export async function latestEventsOfTypes(
  db: Queryable,
  runId: string,
  types: readonly string[],
): Promise<Map<string, { id: string; sequence: number }>> {
  const { rows } = await db.query<{ id: string; event_type: string; sequence: number }>(
    'SELECT DISTINCT ON (event_type) id, event_type, sequence FROM evidence_events WHERE run_id = $1 AND event_type = ANY($2) ORDER BY event_type, sequence DESC',
    [runId, types],
  );
  return new Map(rows.map((r) => [r.event_type, { id: r.id, sequence: r.sequence }]));
}

/** Appends events and moves the run's counters, in one statement. */
export async function appendEvents(db: Queryable, runId: string, events: readonly EventRow[]): Promise<void> {
  const last = events[events.length - 1];
  if (!last) return;
  const params: unknown[] = [runId, last.sequence, last.id];
  await db.query(
    `WITH ${eventInserts(params, events)} UPDATE evidence_runs SET event_count = $2, last_event_id = $3, updated_at = now() WHERE id = $1`,
    params,
  );
}

/** What a signing statement returns for the run's pending log leaf (log/store.ts `pendingLeavesFrom`). */
const SIGNED_RETURNING = 'RETURNING id, org_id, subject_type, job_id, root_hash, event_count, signed_at';

export interface Signature {
  root_hash: string;
  root_signature_hex: string;
  signer_public_key_hex: string;
  signer_key_id: string;
  summary: string;
}

/**
 * Appends the closing events and signs the run in one statement, provided `signer_key_id` is
 * still the active platform key (another process may have rotated it). The events are written
 * either way; returns false when the key was no longer active and the run is left unsigned.
 */
export async function appendAndSign(
  db: Queryable,
  runId: string,
  events: readonly EventRow[],
  signed: Signature,
  eventCount: number,
  lastEventId: string | null,
): Promise<boolean> {
  const params: unknown[] = [
    runId,
    signed.root_hash,
    signed.root_signature_hex,
    signed.signer_public_key_hex,
    signed.signer_key_id,
    signed.summary,
    eventCount,
    lastEventId,
  ];
  // The run enters the transparency log as a pending leaf in the same statement.
  const update = `up AS (UPDATE evidence_runs SET status = 'signed', root_hash = $2, root_signature_hex = $3, signer_public_key_hex = $4, signer_key_id = $5,
       summary = $6, event_count = $7, last_event_id = $8, signed_at = now(), updated_at = now()
     WHERE id = $1 AND EXISTS (SELECT 1 FROM platform_keys WHERE key_id = $5 AND valid_until IS NULL) ${SIGNED_RETURNING}),
     lg AS (${pendingLeavesFrom('up')})
     SELECT id FROM up`;
  const { rows } = await db.query(
    events.length > 0 ? `WITH ${eventInserts(params, events)}, ${update}` : `WITH ${update}`,
    params,
  );
  return rows.length === 1;
}

/** One run of {@link appendAndSignMany}: its signature and its counters after the append. */
export interface RunSigning {
  runId: string;
  signed: Signature;
  eventCount: number;
  lastEventId: string | null;
}

/**
 * {@link appendAndSign} for many runs in one statement (the events of all of them, in arrays):
 * every run is signed whose `signer_key_id` is still the active platform key. Returns the ids of
 * the runs signed; the events are written either way.
 */
export async function appendAndSignMany(
  db: Queryable,
  events: readonly EventRow[],
  runs: readonly RunSigning[],
): Promise<Set<string>> {
  const { rows } = await db.query<{ id: string }>(
    `WITH ev AS (INSERT INTO evidence_events (id, run_id, sequence, event_type, subject_id, summary, metadata, created_at, event_hash, parents)
                 SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[]))
     , up AS (UPDATE evidence_runs SET status = 'signed', root_hash = v.root_hash, root_signature_hex = v.root_signature_hex,
            signer_public_key_hex = v.signer_public_key_hex, signer_key_id = v.signer_key_id, summary = v.summary,
            event_count = v.event_count, last_event_id = v.last_event_id, signed_at = now(), updated_at = now()
       FROM unnest($11::text[], $12::text[], $13::text[], $14::text[], $15::text[], $16::text[], $17::int[], $18::text[])
            AS v(id, root_hash, root_signature_hex, signer_public_key_hex, signer_key_id, summary, event_count, last_event_id)
      WHERE evidence_runs.id = v.id AND evidence_runs.id = ANY($11::text[]) AND EXISTS (SELECT 1 FROM platform_keys WHERE key_id = v.signer_key_id AND valid_until IS NULL)
     RETURNING evidence_runs.id, evidence_runs.org_id, evidence_runs.subject_type, evidence_runs.job_id, evidence_runs.root_hash, evidence_runs.event_count, evidence_runs.signed_at),
     lg AS (${pendingLeavesFrom('up')})
     SELECT id FROM up`,
    [
      ...eventColumns(events),
      runs.map((r) => r.runId),
      runs.map((r) => r.signed.root_hash),
      runs.map((r) => r.signed.root_signature_hex),
      runs.map((r) => r.signed.signer_public_key_hex),
      runs.map((r) => r.signed.signer_key_id),
      runs.map((r) => r.signed.summary),
      runs.map((r) => r.eventCount),
      runs.map((r) => r.lastEventId),
    ],
  );
  return new Set(rows.map((r) => r.id));
}

/** Signs a run whose events are all written (the key check already done by the caller). */
export async function markSigned(
  db: Queryable,
  runId: string,
  signed: Signature,
  eventCount: number,
  lastEventId: string | null,
): Promise<void> {
  await db.query(
    `WITH up AS (UPDATE evidence_runs SET status = 'signed', root_hash = $2, root_signature_hex = $3, signer_public_key_hex = $4, signer_key_id = $5,
       summary = $6, event_count = $7, last_event_id = $8, signed_at = now(), updated_at = now() WHERE id = $1 ${SIGNED_RETURNING})
     ${pendingLeavesFrom('up')}`,
    [
      runId,
      signed.root_hash,
      signed.root_signature_hex,
      signed.signer_public_key_hex,
      signed.signer_key_id,
      signed.summary,
      eventCount,
      lastEventId,
    ],
  );
}

/** A tenant's run by its subject (job id or completion id); another tenant's is not found. */
export async function findRun(db: Queryable, orgId: string, subjectId: string): Promise<RunRow | undefined> {
  const { rows } = await db.query<RunRow>('SELECT * FROM evidence_runs WHERE org_id = $1 AND job_id = $2', [
    orgId,
    subjectId,
  ]);
  return rows[0];
}

/**
 * A run's events in sequence order, and its edges read from their `parents`: ordered by the `to`
 * event's sequence, then the `from` event's, then the edge type.
 */
export async function graphOf(db: Queryable, runId: string): Promise<{ events: EventRow[]; edges: EdgeRow[] }> {
  const { rows: events } = await db.query<EventRow>(
    'SELECT * FROM evidence_events WHERE run_id = $1 ORDER BY sequence',
    [runId],
  );
  return graphOfRows(events);
}

/** {@link graphOf} of events already at hand (a derived run's), in sequence order. */
export function graphOfRows(events: EventRow[]): { events: EventRow[]; edges: EdgeRow[] } {
  const edges = events.flatMap((e) =>
    (JSON.parse(e.parents) as { event_id: string; edge_type: EdgeType }[]).map((p): EdgeRow => ({
      run_id: e.run_id,
      from_event_id: p.event_id,
      to_event_id: e.id,
      edge_type: p.edge_type,
    })),
  );
  return { events, edges };
}

export interface RunFilter {
  job_id?: string | undefined;
  status?: RunStatus | undefined;
  from?: Date | undefined;
  to?: Date | undefined;
  limit: number;
  offset: number;
}

export async function listRuns(db: Queryable, orgId: string, f: RunFilter): Promise<{ rows: RunRow[]; total: number }> {
  const where = ['org_id = $1'];
  const params: unknown[] = [orgId];
  const add = (sql: string, value: unknown) => {
    params.push(value);
    where.push(sql.replace('?', `$${params.length}`));
  };
  if (f.job_id !== undefined) add('job_id = ?', f.job_id);
  if (f.status !== undefined) add('status = ?', f.status);
  if (f.from !== undefined) add('created_at >= ?', f.from);
  if (f.to !== undefined) add('created_at < ?', f.to);
  const clause = where.join(' AND ');
  const [rows, count] = await Promise.all([
    db.query<RunRow>(
      `SELECT * FROM evidence_runs WHERE ${clause} ORDER BY created_at DESC, id DESC LIMIT $${params.length + 1} OFFSET $${params.length + 2}`,
      [...params, f.limit, f.offset],
    ),
    db.query<{ n: number }>(`SELECT count(*)::int AS n FROM evidence_runs WHERE ${clause}`, params),
  ]);
  return { rows: rows.rows, total: count.rows[0]?.n ?? 0 };
}

/** A run whose events are derived, with its counters (and, once closed, its root). */
export type DerivedRun = NewRun & { event_count: number; last_event_id: string | null; root_hash: string };

/** The 12 array parameters of runs: their first 10 columns as `evidence_runs` takes them, then `event_count` and `last_event_id`. */
function derivedRunColumns(runs: readonly DerivedRun[]): unknown[][] {
  return [
    runs.map((r) => r.id),
    runs.map((r) => r.org_id),
    runs.map((r) => r.buyer_id),
    runs.map((r) => r.subject_type),
    runs.map((r) => r.job_id),
    runs.map((r) => r.summary),
    runs.map((r) => r.jurisdiction),
    runs.map((r) => r.policy_id),
    runs.map((r) => r.trust_tier),
    runs.map((r) => r.work_type),
    runs.map((r) => r.event_count),
    runs.map((r) => r.last_event_id),
  ];
}

const DERIVED_VALUES = `unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::text[], $11::int[], $12::text[], $13::text[])
  AS v(id, org_id, buyer_id, subject_type, job_id, summary, jurisdiction, policy_id, trust_tier, work_type, event_count, last_event_id, root_hash)`;

/** Inserts open runs whose events are derived (no event rows), in one statement. */
export async function insertDerivedRuns(db: Queryable, runs: readonly DerivedRun[]): Promise<void> {
  await db.query(
    `INSERT INTO evidence_runs (id, org_id, buyer_id, subject_type, job_id, summary, jurisdiction, policy_id, trust_tier, work_type, event_count, last_event_id)
     SELECT id, org_id, buyer_id, subject_type, job_id, summary, jurisdiction, policy_id, trust_tier, work_type, event_count, last_event_id FROM ${DERIVED_VALUES}`,
    [...derivedRunColumns(runs), runs.map(() => null)],
  );
}

/**
 * Closes open runs whose events are derived: root, counters and closing time, and their pending
 * log leaves, in one statement; no certificate (signed when first read). How many it closed.
 */
export async function closeRunRows(db: Queryable, runs: readonly DerivedRun[]): Promise<number> {
  const { rows } = await db.query<{ id: string }>(
    `WITH up AS (UPDATE evidence_runs SET status = 'signed', root_hash = v.root_hash, summary = v.summary, event_count = v.event_count,
            last_event_id = v.last_event_id, signed_at = now(), updated_at = now()
       FROM ${DERIVED_VALUES}
      WHERE evidence_runs.id = v.id AND evidence_runs.id = ANY($1::text[]) AND evidence_runs.status = 'open'
     RETURNING evidence_runs.id, evidence_runs.org_id, evidence_runs.subject_type, evidence_runs.job_id, evidence_runs.root_hash,
               evidence_runs.event_count, evidence_runs.signed_at),
     lg AS (${pendingLeavesFrom('up')})
     SELECT id FROM up`,
    [...derivedRunColumns(runs), runs.map((r) => r.root_hash)],
  );
  return rows.length;
}

/** {@link closeRunRows} for runs not inserted yet: inserted closed, with their pending leaves. How many it inserted. */
export async function insertClosedRuns(db: Queryable, runs: readonly DerivedRun[]): Promise<number> {
  const { rows } = await db.query<{ id: string }>(
    `WITH run AS (INSERT INTO evidence_runs (id, org_id, buyer_id, subject_type, job_id, summary, jurisdiction, policy_id, trust_tier, work_type, event_count, last_event_id,
                                             status, root_hash, signed_at)
                  SELECT id, org_id, buyer_id, subject_type, job_id, summary, jurisdiction, policy_id, trust_tier, work_type, event_count, last_event_id,
                         'signed', root_hash, now() FROM ${DERIVED_VALUES}
                  ${SIGNED_RETURNING}),
          lg AS (${pendingLeavesFrom('run')})
     SELECT id FROM run`,
    [...derivedRunColumns(runs), runs.map((r) => r.root_hash)],
  );
  return rows.length;
}

/**
 * Stores a closed run's certificate once, signed now by a key still active: the run as it now
 * stands, or undefined when the run was certified meanwhile or the key is no longer the active one.
 */
export async function storeCertificate(
  db: Queryable,
  runId: string,
  cert: { root_signature_hex: string; signer_public_key_hex: string; signer_key_id: string },
): Promise<RunRow | undefined> {
  const { rows } = await db.query<RunRow>(
    `UPDATE evidence_runs SET root_signature_hex = $2, signer_public_key_hex = $3, signer_key_id = $4, signed_at = now(), updated_at = now()
      WHERE id = $1 AND status = 'signed' AND root_signature_hex IS NULL
        AND EXISTS (SELECT 1 FROM platform_keys WHERE key_id = $4 AND valid_until IS NULL)
     RETURNING *`,
    [runId, cert.root_signature_hex, cert.signer_public_key_hex, cert.signer_key_id],
  );
  return rows[0];
}

/** A run by its id. */
export async function findRunById(db: Queryable, runId: string): Promise<RunRow | undefined> {
  const { rows } = await db.query<RunRow>('SELECT * FROM evidence_runs WHERE id = $1', [runId]);
  return rows[0];
}

import type { StoredReceipt } from '@svc/protocol';
import type { Queryable } from '../../platform/db/index.js';

export interface ReceiptRow {
  id: string;
  job_id: string;
  work_id: string;
  org_id: string;
  node_id: string;
  node_public_key: string;
  result_hash: string;
  metering_units: number;
  signature: string;
  signature_version: string;
  metadata: Record<string, unknown>;
  created_at: Date;
}

/**
 * A receipt's id: derived from its work item's (one receipt per work item), so the id a client
 * was answered with before the records committed is the id they are stored under, whichever
 * instance applies the receipt (a re-send after a restart included).
 */
export function receiptIdOf(workId: string): string {
  return `rcpt_${workId.slice(workId.indexOf('_') + 1)}`;
}

export async function insertReceipt(
  db: Queryable,
  r: Omit<ReceiptRow, 'signature_version' | 'created_at'>,
): Promise<ReceiptRow> {
  const { rows } = await db.query<ReceiptRow>(
    `INSERT INTO receipts (id, job_id, work_id, org_id, node_id, node_public_key, result_hash, metering_units, signature, metadata)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING *`,
    [
      r.id,
      r.job_id,
      r.work_id,
      r.org_id,
      r.node_id,
      r.node_public_key,
      r.result_hash,
      r.metering_units,
      r.signature,
      JSON.stringify(r.metadata),
    ],
  );
  const row = rows[0];
  if (!row) throw new Error('receipt insert returned nothing');
  return row;
}

/** {@link insertReceipt} for many receipts in one statement; returns them as stored, in order. */
export async function insertReceipts(
  db: Queryable,
  receipts: readonly Omit<ReceiptRow, 'signature_version' | 'created_at'>[],
): Promise<ReceiptRow[]> {
  const column = <K extends keyof (typeof receipts)[number]>(k: K) => receipts.map((r) => r[k]);
  const { rows } = await db.query<ReceiptRow>(
    `INSERT INTO receipts (id, job_id, work_id, org_id, node_id, node_public_key, result_hash, metering_units, signature, metadata)
     SELECT id, job_id, work_id, org_id, node_id, node_public_key, result_hash, units, signature, metadata::jsonb
       FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::bigint[], $9::text[], $10::text[])
            AS v(id, job_id, work_id, org_id, node_id, node_public_key, result_hash, units, signature, metadata)
     RETURNING *`,
    [
      column('id'),
      column('job_id'),
      column('work_id'),
      column('org_id'),
      column('node_id'),
      column('node_public_key'),
      column('result_hash'),
      column('metering_units'),
      column('signature'),
      receipts.map((r) => JSON.stringify(r.metadata)),
    ],
  );
  const byId = new Map(rows.map((r) => [r.id, r]));
  return receipts.map((r) => {
    const row = byId.get(r.id);
    if (!row) throw new Error(`receipt ${r.id} was not inserted`);
    return row;
  });
}

/** The receipt accepted for a work item, if any (a work item has at most one). */
export async function receiptOfWork(db: Queryable, workId: string): Promise<ReceiptRow | undefined> {
  const { rows } = await db.query<ReceiptRow>('SELECT * FROM receipts WHERE work_id = $1', [workId]);
  return rows[0];
}

export async function receiptsOfJob(db: Queryable, orgId: string, jobId: string): Promise<ReceiptRow[]> {
  const { rows } = await db.query<ReceiptRow>(
    'SELECT * FROM receipts WHERE org_id = $1 AND job_id = $2 ORDER BY created_at, id',
    [orgId, jobId],
  );
  return rows;
}

export async function receiptsBetween(
  db: Queryable,
  orgId: string,
  from: Date,
  to: Date,
  limit: number,
): Promise<ReceiptRow[]> {
  const { rows } = await db.query<ReceiptRow>(
    'SELECT * FROM receipts WHERE org_id = $1 AND created_at >= $2 AND created_at < $3 ORDER BY created_at, id LIMIT $4',
    [orgId, from, to, limit],
  );
  return rows;
}

/** A receipt as every receipts endpoint returns it (DESIGN.md section 9). */
export function receiptView(r: ReceiptRow): StoredReceipt {
  return {
    id: r.id,
    job_id: r.job_id,
    node_id: r.node_id,
    node_public_key: r.node_public_key,
    result_hash: r.result_hash,
    metering_units: r.metering_units,
    signature: r.signature,
    signature_version: r.signature_version,
    metadata: r.metadata,
    created_at: r.created_at.toISOString(),
  };
}

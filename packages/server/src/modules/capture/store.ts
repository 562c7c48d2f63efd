import type { Queryable } from '../../platform/db/index.js';
import type { CaptureStatus } from './states.js';

/** SQL of sites, epochs, capture sets and their files (migration 0050). Every read is scoped to an organization. */

export interface SiteRow {
  id: string;
  org_id: string;
  name: string;
  country: string | null;
  latitude: number | null;
  longitude: number | null;
  description: string | null;
  created_by: string;
  created_at: Date;
  updated_at: Date;
}

export interface EpochRow {
  id: string;
  org_id: string;
  site_id: string;
  label: string;
  captured_from: Date | null;
  captured_to: Date | null;
  created_at: Date;
}

export interface CaptureSetRow {
  id: string;
  org_id: string;
  site_epoch_id: string;
  source_partner_id: string | null;
  source_type: string | null;
  accuracy_profile: string | null;
  ingest_mode: string | null;
  manifest_version: string;
  manifest_json: string;
  status: CaptureStatus;
  failure_reason: string | null;
  raw_bytes: number;
  total_files: number;
  created_by: string;
  created_at: Date;
  updated_at: Date;
  completed_at: Date | null;
  processing_job_id: string | null;
  outputs_json: string | null;
}

export type Verification = 'pending' | 'verified' | 'missing' | 'size_mismatch' | 'hash_mismatch';

export interface CaptureFileRow {
  capture_set_id: string;
  path: string;
  bytes: number;
  sha256: string;
  content_type: string;
  bytes_received: number;
  upload_id: string | null;
  verification: Verification;
  actual_sha256: string | null;
  verified_at: Date | null;
}

export type SiteFields = Pick<SiteRow, 'name' | 'country' | 'latitude' | 'longitude' | 'description'>;

export async function insertSite(db: Queryable, site: Omit<SiteRow, 'created_at' | 'updated_at'>): Promise<SiteRow> {
  const { rows } = await db.query<SiteRow>(
    `INSERT INTO sites (id, org_id, name, country, latitude, longitude, description, created_by) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING *`,
    [site.id, site.org_id, site.name, site.country, site.latitude, site.longitude, site.description, site.created_by],
  );
  return rows[0] as SiteRow;
}

export async function findSite(db: Queryable, orgId: string, id: string): Promise<SiteRow | undefined> {
  const { rows } = await db.query<SiteRow>('SELECT * FROM sites WHERE id = $1 AND org_id = $2', [id, orgId]);
  return rows[0];
}

export async function listSites(
  db: Queryable,
  orgId: string,
  page: { limit: number; offset: number },
): Promise<{ rows: SiteRow[]; total: number }> {
  const [list, count] = await Promise.all([
    db.query<SiteRow>('SELECT * FROM sites WHERE org_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2 OFFSET $3', [
      orgId,
      page.limit,
      page.offset,
    ]),
    db.query<{ n: number }>('SELECT count(*)::int AS n FROM sites WHERE org_id = $1', [orgId]),
  ]);
  return { rows: list.rows, total: count.rows[0]?.n ?? 0 };
}

/** Sets the given fields (a `null` clears one); undefined when the site is not the organization's. */
export async function updateSite(
  db: Queryable,
  orgId: string,
  id: string,
  fields: Partial<SiteFields>,
): Promise<SiteRow | undefined> {
  const names = (['name', 'country', 'latitude', 'longitude', 'description'] as const).filter(
    (k) => fields[k] !== undefined,
  );
  const params: unknown[] = [id, orgId, ...names.map((k) => fields[k])];
  const sets = names.map((k, i) => `${k} = $${i + 3}`);
  const { rows } = await db.query<SiteRow>(
    `UPDATE sites SET ${[...sets, 'updated_at = now()'].join(', ')} WHERE id = $1 AND org_id = $2 RETURNING *`,
    params,
  );
  return rows[0];
}

export async function countCaptureSetsOfSite(db: Queryable, siteId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM capture_sets c JOIN site_epochs e ON e.id = c.site_epoch_id WHERE e.site_id = $1',
    [siteId],
  );
  return rows[0]?.n ?? 0;
}

/** Deletes a site and its epochs (which have no capture sets: the caller checked, the foreign key insists). */
export async function deleteSite(db: Queryable, orgId: string, id: string): Promise<boolean> {
  const { rowCount } = await db.query('DELETE FROM sites WHERE id = $1 AND org_id = $2', [id, orgId]);
  return rowCount > 0;
}

export async function insertEpoch(db: Queryable, epoch: Omit<EpochRow, 'created_at'>): Promise<EpochRow> {
  const { rows } = await db.query<EpochRow>(
    'INSERT INTO site_epochs (id, org_id, site_id, label, captured_from, captured_to) VALUES ($1, $2, $3, $4, $5, $6) RETURNING *',
    [epoch.id, epoch.org_id, epoch.site_id, epoch.label, epoch.captured_from, epoch.captured_to],
  );
  return rows[0] as EpochRow;
}

export async function findEpoch(db: Queryable, orgId: string, id: string): Promise<EpochRow | undefined> {
  const { rows } = await db.query<EpochRow>('SELECT * FROM site_epochs WHERE id = $1 AND org_id = $2', [id, orgId]);
  return rows[0];
}

export async function listEpochs(db: Queryable, siteId: string): Promise<EpochRow[]> {
  const { rows } = await db.query<EpochRow>(
    'SELECT * FROM site_epochs WHERE site_id = $1 ORDER BY created_at DESC, id DESC',
    [siteId],
  );
  return rows;
}

export async function insertCaptureSet(
  db: Queryable,
  set: Omit<
    CaptureSetRow,
    'created_at' | 'updated_at' | 'completed_at' | 'failure_reason' | 'processing_job_id' | 'outputs_json'
  >,
  files: readonly Pick<CaptureFileRow, 'path' | 'bytes' | 'sha256' | 'content_type'>[],
): Promise<CaptureSetRow> {
  const { rows } = await db.query<CaptureSetRow>(
    `INSERT INTO capture_sets (id, org_id, site_epoch_id, source_partner_id, source_type, accuracy_profile, ingest_mode, manifest_version, manifest_json, status, raw_bytes, total_files, created_by)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) RETURNING *`,
    [
      set.id,
      set.org_id,
      set.site_epoch_id,
      set.source_partner_id,
      set.source_type,
      set.accuracy_profile,
      set.ingest_mode,
      set.manifest_version,
      set.manifest_json,
      set.status,
      set.raw_bytes,
      set.total_files,
      set.created_by,
    ],
  );
  // One statement for every file: unnest keeps it a fixed number of parameters however long the manifest.
  if (files.length > 0) {
    await db.query(
      `INSERT INTO capture_files (capture_set_id, path, bytes, sha256, content_type)
       SELECT $1, f.path, f.bytes, f.sha256, f.content_type FROM unnest($2::text[], $3::bigint[], $4::text[], $5::text[]) AS f(path, bytes, sha256, content_type)`,
      [
        set.id,
        files.map((f) => f.path),
        files.map((f) => f.bytes),
        files.map((f) => f.sha256),
        files.map((f) => f.content_type),
      ],
    );
  }
  return rows[0] as CaptureSetRow;
}

export async function findCaptureSet(db: Queryable, orgId: string, id: string): Promise<CaptureSetRow | undefined> {
  const { rows } = await db.query<CaptureSetRow>('SELECT * FROM capture_sets WHERE id = $1 AND org_id = $2', [
    id,
    orgId,
  ]);
  return rows[0];
}

/** The set, locked for the caller's transaction (its state changes are serialised on this row). */
export async function lockCaptureSet(tx: Queryable, orgId: string, id: string): Promise<CaptureSetRow | undefined> {
  const { rows } = await tx.query<CaptureSetRow>(
    'SELECT * FROM capture_sets WHERE id = $1 AND org_id = $2 FOR UPDATE',
    [id, orgId],
  );
  return rows[0];
}

export async function listCaptureSets(
  db: Queryable,
  epochId: string,
  page: { limit: number; offset: number },
): Promise<CaptureSetRow[]> {
  const { rows } = await db.query<CaptureSetRow>(
    'SELECT * FROM capture_sets WHERE site_epoch_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2 OFFSET $3',
    [epochId, page.limit, page.offset],
  );
  return rows;
}

export async function filesOf(db: Queryable, captureSetId: string): Promise<CaptureFileRow[]> {
  const { rows } = await db.query<CaptureFileRow>(
    'SELECT * FROM capture_files WHERE capture_set_id = $1 ORDER BY path',
    [captureSetId],
  );
  return rows;
}

/** Moves the set to `to` if it is in one of `from`; false when another writer moved it first. */
export async function moveCaptureSet(
  tx: Queryable,
  id: string,
  from: readonly CaptureStatus[],
  to: CaptureStatus,
  extra: { failure_reason?: string; completed?: boolean } = {},
): Promise<boolean> {
  const { rowCount } = await tx.query(
    `UPDATE capture_sets SET status = $2, updated_at = now(), failure_reason = coalesce($4, failure_reason), completed_at = CASE WHEN $5 THEN now() ELSE completed_at END
     WHERE id = $1 AND status = ANY($3::text[])`,
    [id, to, [...from], extra.failure_reason ?? null, extra.completed === true],
  );
  return rowCount > 0;
}

export async function setVerification(
  tx: Queryable,
  captureSetId: string,
  results: readonly {
    path: string;
    verification: Verification;
    actual_sha256: string | null;
    bytes_received: number;
  }[],
): Promise<void> {
  if (results.length === 0) return;
  await tx.query(
    `UPDATE capture_files c SET verification = r.verification, actual_sha256 = r.actual_sha256, bytes_received = r.bytes_received, verified_at = now()
     FROM unnest($2::text[], $3::text[], $4::text[], $5::bigint[]) AS r(path, verification, actual_sha256, bytes_received)
     WHERE c.capture_set_id = $1 AND c.path = r.path`,
    [
      captureSetId,
      results.map((r) => r.path),
      results.map((r) => r.verification),
      results.map((r) => r.actual_sha256),
      results.map((r) => r.bytes_received),
    ],
  );
}

/** Records bytes received for one file (from an upload's progress). */
export async function setBytesReceived(
  db: Queryable,
  captureSetId: string,
  path: string,
  bytes: number,
  uploadId: string | null,
): Promise<void> {
  await db.query(
    'UPDATE capture_files SET bytes_received = $3, upload_id = coalesce($4, upload_id) WHERE capture_set_id = $1 AND path = $2',
    [captureSetId, path, bytes, uploadId],
  );
}

/** Bytes received by the upload `uploadId`, if it is still the file's current upload; never moves backwards. */
export async function setProgressOfUpload(
  db: Queryable,
  captureSetId: string,
  uploadId: string,
  offset: number,
): Promise<void> {
  await db.query(
    'UPDATE capture_files SET bytes_received = greatest(bytes_received, $3) WHERE capture_set_id = $1 AND upload_id = $2',
    [captureSetId, uploadId, offset],
  );
}

/** The set by id alone (for a job's own work, whose organization the job row carries); locked. */
export async function lockCaptureSetById(tx: Queryable, id: string): Promise<CaptureSetRow | undefined> {
  const { rows } = await tx.query<CaptureSetRow>('SELECT * FROM capture_sets WHERE id = $1 FOR UPDATE', [id]);
  return rows[0];
}

/** Records the job processing the set (its outputs cleared until that job reports them). */
export async function setProcessingJob(tx: Queryable, id: string, jobId: string): Promise<void> {
  await tx.query('UPDATE capture_sets SET processing_job_id = $2, outputs_json = NULL WHERE id = $1', [id, jobId]);
}

/** Records the outputs of the processing job as checked against their manifest. */
export async function setOutputs(tx: Queryable, id: string, outputsJson: string): Promise<void> {
  await tx.query('UPDATE capture_sets SET outputs_json = $2 WHERE id = $1', [id, outputsJson]);
}

/** Takes the lock of an upload for `holder` when it is free or its lease ran out; true when taken. */
export async function tryLockUpload(
  db: Queryable,
  uploadId: string,
  holder: string,
  leaseMs: number,
): Promise<boolean> {
  const { rows } = await db.query<{ holder: string }>(
    `INSERT INTO capture_upload_locks (upload_id, holder, expires_at) VALUES ($1, $2, now() + $3 * interval '1 millisecond')
     ON CONFLICT (upload_id) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
       WHERE capture_upload_locks.expires_at < now()
     RETURNING holder`,
    [uploadId, holder, leaseMs],
  );
  return rows[0]?.holder === holder;
}

/** Extends a held lock's lease; false when `holder` no longer holds it. */
export async function renewUploadLock(
  db: Queryable,
  uploadId: string,
  holder: string,
  leaseMs: number,
): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE capture_upload_locks SET expires_at = now() + $3 * interval '1 millisecond' WHERE upload_id = $1 AND holder = $2`,
    [uploadId, holder, leaseMs],
  );
  return rowCount > 0;
}

export async function unlockUpload(db: Queryable, uploadId: string, holder: string): Promise<void> {
  await db.query('DELETE FROM capture_upload_locks WHERE upload_id = $1 AND holder = $2', [uploadId, holder]);
}

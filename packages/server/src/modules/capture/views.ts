import type { OutputCheck } from './processing.js';
import type { CaptureFileRow, CaptureSetRow, EpochRow, SiteRow } from './store.js';

/** Rows as the API returns them (schemas.ts). Pure. */

const iso = (d: Date | string) => new Date(d).toISOString();
const isoOrNull = (d: Date | string | null) => (d === null ? null : iso(d));

export function siteView(s: SiteRow) {
  return {
    id: s.id,
    name: s.name,
    country: s.country,
    latitude: s.latitude,
    longitude: s.longitude,
    description: s.description,
    created_at: iso(s.created_at),
    updated_at: iso(s.updated_at),
  };
}

export function epochView(e: EpochRow) {
  return {
    id: e.id,
    site_id: e.site_id,
    label: e.label,
    captured_from: isoOrNull(e.captured_from),
    captured_to: isoOrNull(e.captured_to),
    created_at: iso(e.created_at),
  };
}

export function captureSetView(c: CaptureSetRow) {
  return {
    id: c.id,
    site_epoch_id: c.site_epoch_id,
    source_partner_id: c.source_partner_id,
    source_type: c.source_type,
    accuracy_profile: c.accuracy_profile,
    ingest_mode: c.ingest_mode,
    manifest_version: c.manifest_version,
    manifest_json: c.manifest_json,
    status: c.status,
    failure_reason: c.failure_reason,
    raw_bytes: c.raw_bytes,
    total_files: c.total_files,
    created_at: iso(c.created_at),
    updated_at: iso(c.updated_at),
    completed_at: isoOrNull(c.completed_at),
    processing_job_id: c.processing_job_id,
    outputs: c.outputs_json === null ? null : (JSON.parse(c.outputs_json) as OutputCheck[]),
  };
}

export function fileView(f: CaptureFileRow) {
  return {
    path: f.path,
    bytes: f.bytes,
    sha256: f.sha256,
    content_type: f.content_type,
    bytes_received: f.bytes_received,
    verification: f.verification,
    verified_at: isoOrNull(f.verified_at),
  };
}

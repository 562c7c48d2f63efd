-- Capture sets, sites and epochs (DESIGN.md section 14): a site captured at points in time
-- (epochs); each capture set lists its files in a manifest and holds them in the blob store.
CREATE TABLE sites (
  id text PRIMARY KEY,
  org_id text NOT NULL REFERENCES organizations(id),
  name text NOT NULL,
  country text,
  latitude double precision,
  longitude double precision,
  description text,
  created_by text NOT NULL REFERENCES buyers(id),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sites_org_created ON sites (org_id, created_at DESC);

CREATE TABLE site_epochs (
  id text PRIMARY KEY,
  org_id text NOT NULL REFERENCES organizations(id),
  site_id text NOT NULL REFERENCES sites(id) ON DELETE CASCADE,
  label text NOT NULL,
  captured_from timestamptz,
  captured_to timestamptz,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX site_epochs_site ON site_epochs (site_id, created_at DESC);

-- A site with capture sets cannot be deleted (RESTRICT): their files and evidence stay.
CREATE TABLE capture_sets (
  id text PRIMARY KEY,
  org_id text NOT NULL REFERENCES organizations(id),
  site_epoch_id text NOT NULL REFERENCES site_epochs(id) ON DELETE RESTRICT,
  source_partner_id text,
  source_type text,
  accuracy_profile text,
  ingest_mode text,
  manifest_version text NOT NULL,
  manifest_json text NOT NULL,
  status text NOT NULL DEFAULT 'pending_upload'
    CHECK (status IN ('pending_upload', 'uploading', 'ready', 'processing', 'verified', 'failed')),
  failure_reason text,
  raw_bytes bigint NOT NULL,
  total_files integer NOT NULL,
  created_by text NOT NULL REFERENCES buyers(id),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  completed_at timestamptz
);
CREATE INDEX capture_sets_epoch ON capture_sets (site_epoch_id, created_at DESC);

-- One row per manifest file: what was declared, how much has arrived, and what `complete` found.
CREATE TABLE capture_files (
  capture_set_id text NOT NULL REFERENCES capture_sets(id) ON DELETE CASCADE,
  path text NOT NULL,
  bytes bigint NOT NULL,
  sha256 text NOT NULL,
  content_type text NOT NULL,
  bytes_received bigint NOT NULL DEFAULT 0,
  upload_id text,
  verification text NOT NULL DEFAULT 'pending'
    CHECK (verification IN ('pending', 'verified', 'missing', 'size_mismatch', 'hash_mismatch')),
  actual_sha256 text,
  verified_at timestamptz,
  PRIMARY KEY (capture_set_id, path)
);

-- Capture sets have their own evidence run (created, each file verified, completed, processed).
ALTER TABLE evidence_runs DROP CONSTRAINT IF EXISTS evidence_runs_subject_type_check;
ALTER TABLE evidence_runs ADD CONSTRAINT evidence_runs_subject_type_check CHECK (subject_type IN ('job', 'request', 'capture_set'));

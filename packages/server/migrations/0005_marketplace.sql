-- Marketplace: node details, jobs, work leases, receipts, the audit trail, webhooks, blobs.
ALTER TABLE nodes
  ADD COLUMN name text NOT NULL DEFAULT '',
  ADD COLUMN capabilities text[] NOT NULL DEFAULT '{}',
  ADD COLUMN max_concurrency integer NOT NULL DEFAULT 1,
  ADD COLUMN active_work integer NOT NULL DEFAULT 0,
  ADD COLUMN price_micro_per_unit jsonb NOT NULL DEFAULT '{}',
  ADD COLUMN green boolean NOT NULL DEFAULT false,
  ADD COLUMN reputation integer NOT NULL DEFAULT 100,
  ADD COLUMN geohash_bucket integer,
  ADD COLUMN sensors text,
  ADD COLUMN free_vram_bytes bigint;
CREATE INDEX nodes_org ON nodes (org_id);

CREATE TABLE jobs (
  id text PRIMARY KEY,
  org_id text NOT NULL REFERENCES organizations(id),
  buyer_id text NOT NULL REFERENCES buyers(id),
  kind integer NOT NULL,
  status text NOT NULL CHECK (status IN ('submitted', 'pending', 'assigned', 'running', 'completed', 'failed', 'cancelled')),
  execution_pool text NOT NULL,
  budget_cents bigint NOT NULL,
  max_price_micro_per_unit double precision NOT NULL,
  currency text NOT NULL DEFAULT 'CAD',
  spec jsonb NOT NULL,                       -- the validated request, as submitted
  estimated_cost_micro bigint NOT NULL,
  estimated_duration_ms bigint NOT NULL,
  hold_id text,
  attempts integer NOT NULL DEFAULT 0,
  node_id text REFERENCES nodes(id),
  work_id text,
  charged_cents bigint,
  result_hash text,
  failure_reason text,
  created_at timestamptz NOT NULL DEFAULT now(),
  submitted_at timestamptz NOT NULL DEFAULT now(),
  pending_at timestamptz,
  assigned_at timestamptz,
  started_at timestamptz,
  completed_at timestamptz
);
CREATE INDEX jobs_org_created ON jobs (org_id, created_at DESC);
CREATE INDEX jobs_pending ON jobs (created_at) WHERE status = 'pending';
CREATE INDEX jobs_status_created ON jobs (status, created_at);

-- One lease of a job (or, later, a gateway request) to one node. A job has one per attempt.
CREATE TABLE work_items (
  id text PRIMARY KEY,
  job_id text NOT NULL,
  org_id text NOT NULL REFERENCES organizations(id),
  node_id text NOT NULL REFERENCES nodes(id),
  type text NOT NULL,
  kind integer NOT NULL,
  model text,
  payload jsonb NOT NULL,
  stream boolean NOT NULL DEFAULT false,
  status text NOT NULL CHECK (status IN ('leased', 'delivered', 'completed', 'failed', 'lost', 'cancelled')),
  lease_expires_at timestamptz NOT NULL,
  price_micro_per_unit double precision NOT NULL DEFAULT 0,
  result_hash text,
  result_content_type text,
  result_bytes bigint,
  metering_units bigint,
  usage jsonb,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX work_items_job ON work_items (job_id);
CREATE INDEX work_items_node_open ON work_items (node_id) WHERE status IN ('leased', 'delivered');
CREATE INDEX work_items_lease ON work_items (lease_expires_at) WHERE status IN ('leased', 'delivered');

CREATE TABLE receipts (
  id text PRIMARY KEY,
  job_id text NOT NULL,                      -- the SVC1 job_id: a job id or a completion id
  work_id text NOT NULL UNIQUE REFERENCES work_items(id),
  org_id text NOT NULL REFERENCES organizations(id),
  node_id text NOT NULL REFERENCES nodes(id),
  node_public_key text NOT NULL,
  result_hash text NOT NULL,
  metering_units bigint NOT NULL,
  signature text NOT NULL,
  signature_version text NOT NULL DEFAULT 'SVC1',
  metadata jsonb NOT NULL DEFAULT '{}',
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX receipts_job ON receipts (job_id);
CREATE INDEX receipts_org_created ON receipts (org_id, created_at);

CREATE TABLE job_events (
  id bigserial PRIMARY KEY,
  job_id text NOT NULL,
  type text NOT NULL,
  details jsonb NOT NULL DEFAULT '{}',
  at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX job_events_job ON job_events (job_id, id);

-- Signatures of node requests seen within the clock-skew window (replay protection, all instances).
CREATE TABLE node_request_nonces (
  signature text PRIMARY KEY,
  seen_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX node_request_nonces_seen ON node_request_nonces (seen_at);

CREATE TABLE blobs (
  key text PRIMARY KEY,
  content_type text NOT NULL,
  bytes bytea NOT NULL,
  sha256 text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE webhook_deliveries (
  id text PRIMARY KEY,
  job_id text NOT NULL,
  org_id text NOT NULL REFERENCES organizations(id),
  url text NOT NULL,
  event_type text NOT NULL,
  payload jsonb NOT NULL,
  status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
  attempts integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL DEFAULT now(),
  last_error text,
  created_at timestamptz NOT NULL DEFAULT now(),
  delivered_at timestamptz
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';

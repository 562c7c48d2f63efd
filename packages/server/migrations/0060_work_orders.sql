-- Work orders and repository connections (DESIGN.md section 15), owned by modules/work-orders.
CREATE TABLE work_repositories (
  id text PRIMARY KEY,
  org_id text NOT NULL REFERENCES organizations(id),
  repository_url text NOT NULL,
  default_branch text NOT NULL,
  label text,
  -- AES-256-GCM sealed token (platform/token-box.ts) and the id of the key that sealed it.
  token_sealed text,
  token_key_id text,
  created_at timestamptz NOT NULL DEFAULT now(),
  last_preflight_at timestamptz,
  last_preflight_status text,
  last_preflight_job_id text,
  deleted_at timestamptz
);
CREATE INDEX work_repositories_org ON work_repositories (org_id, created_at DESC);

CREATE TABLE work_orders (
  id text PRIMARY KEY,
  org_id text NOT NULL REFERENCES organizations(id),
  buyer_id text NOT NULL,
  repository_id text REFERENCES work_repositories(id),
  -- The request as resolved: goal, plan, branches, paths, checks, preset, trust tier.
  spec jsonb NOT NULL,
  status text NOT NULL CHECK (status IN ('queued', 'running', 'certified', 'needs_review', 'blocked', 'failed', 'approved', 'pr_opened', 'rejected', 'rolled_back')),
  decision jsonb,
  job_id text,
  base_commit text,
  commit_sha text,
  result jsonb,
  approvals jsonb NOT NULL DEFAULT '[]',
  pr jsonb,
  rollback jsonb,
  failure_reason text,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX work_orders_org ON work_orders (org_id, created_at DESC);
CREATE INDEX work_orders_job ON work_orders (job_id);

-- A work order has its own evidence run (subject_type work_order, job_id = the order's id).
ALTER TABLE evidence_runs DROP CONSTRAINT IF EXISTS evidence_runs_subject_type_check;
ALTER TABLE evidence_runs ADD CONSTRAINT evidence_runs_subject_type_check CHECK (subject_type IN ('job', 'request', 'capture_set', 'work_order'));

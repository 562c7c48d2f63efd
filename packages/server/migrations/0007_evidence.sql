-- Evidence runs (DESIGN.md section 11): one per job and per gateway request, appended to in the
-- same transaction as the state change each event describes, signed when the subject ends.
CREATE TABLE evidence_runs (
  id text PRIMARY KEY,
  org_id text NOT NULL REFERENCES organizations(id),
  buyer_id text,
  subject_type text NOT NULL CHECK (subject_type IN ('job', 'request')),
  job_id text NOT NULL UNIQUE,                 -- the job id or the gateway completion id
  status text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'signed')),
  summary text NOT NULL DEFAULT '',
  jurisdiction text,
  policy_id text NOT NULL,
  trust_tier text NOT NULL,
  work_type text NOT NULL,
  event_count integer NOT NULL DEFAULT 0,
  last_event_id text,
  root_hash text,
  root_signature_hex text,
  signer_public_key_hex text,
  signer_key_id text,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  signed_at timestamptz
);
CREATE INDEX evidence_runs_org_created ON evidence_runs (org_id, created_at DESC);

-- `metadata` and `created_at` are kept as the exact text that was hashed, so what the API returns
-- is byte for byte what event_hash covers (a jsonb or timestamptz round trip could change it).
CREATE TABLE evidence_events (
  id text PRIMARY KEY,
  run_id text NOT NULL REFERENCES evidence_runs(id),
  sequence integer NOT NULL CHECK (sequence >= 1),
  event_type text NOT NULL,
  subject_id text NOT NULL,
  summary text NOT NULL,
  metadata text NOT NULL,
  created_at text NOT NULL,
  event_hash text NOT NULL,
  UNIQUE (run_id, sequence)
);

CREATE TABLE evidence_edges (
  run_id text NOT NULL REFERENCES evidence_runs(id),
  from_event_id text NOT NULL REFERENCES evidence_events(id),
  to_event_id text NOT NULL REFERENCES evidence_events(id),
  edge_type text NOT NULL CHECK (edge_type IN ('then', 'caused_by')),
  PRIMARY KEY (to_event_id, from_event_id, edge_type)
);
CREATE INDEX evidence_edges_run ON evidence_edges (run_id);

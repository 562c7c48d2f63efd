-- Inference gateway: requests leased straight to one node, and what they cost.
-- Work for a marketplace job is handed out when a node claims it (dispatched at once); gateway
-- work is leased to the chosen node first and handed out at its next poll (dispatched_at NULL
-- until then).
ALTER TABLE work_items
  ADD COLUMN dispatched_at timestamptz DEFAULT now(),
  ADD COLUMN error text,
  ADD COLUMN error_retryable boolean;
CREATE INDEX work_items_undispatched ON work_items (node_id, created_at) WHERE dispatched_at IS NULL AND status = 'leased';

-- One row per gateway call (chat completion, embeddings, transcription, image generation).
-- `id` is the completion id, the SVC1 receipt's job_id. `work_id` is the current attempt.
CREATE TABLE gateway_requests (
  id text PRIMARY KEY,
  org_id text NOT NULL REFERENCES organizations(id),
  buyer_id text NOT NULL REFERENCES buyers(id),
  type text NOT NULL CHECK (type IN ('chat', 'embeddings', 'transcription', 'image')),
  model text NOT NULL,
  stream boolean NOT NULL DEFAULT false,
  node_id text REFERENCES nodes(id),
  work_id text,
  hold_id text,
  status text NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'completed', 'failed', 'cancelled', 'timeout')),
  usage jsonb,
  charged_cents bigint,
  receipt_id text,
  error text,
  metadata jsonb NOT NULL DEFAULT '{}',
  created_at timestamptz NOT NULL DEFAULT now(),
  completed_at timestamptz
);
CREATE INDEX gateway_requests_org_created ON gateway_requests (org_id, created_at DESC);

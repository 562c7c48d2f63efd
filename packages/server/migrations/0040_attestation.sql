-- The sovereign pool (docs/attestation.md): one-time challenges, each node's latest attestation,
-- and when a node's verification lapses.
ALTER TABLE nodes ADD COLUMN attestation_expires_at timestamptz;

CREATE TABLE attestation_challenges (
  challenge text PRIMARY KEY,
  node_id text NOT NULL REFERENCES nodes(id) ON DELETE CASCADE,
  expires_at timestamptz NOT NULL,
  used_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX attestation_challenges_expires_at ON attestation_challenges (expires_at);

CREATE TABLE node_attestations (
  node_id text PRIMARY KEY REFERENCES nodes(id) ON DELETE CASCADE,
  method integer NOT NULL,
  verified boolean NOT NULL,
  measurement text,
  tcb_status text,
  checks jsonb NOT NULL,
  verified_at timestamptz,
  expires_at timestamptz,
  attested_at timestamptz NOT NULL DEFAULT now()
);

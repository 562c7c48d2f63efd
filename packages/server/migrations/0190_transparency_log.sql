-- The transparency log (DESIGN.md section 17; modules/log owns these tables). A closed evidence
-- run enters `log_leaves` as pending (leaf_index NULL) in the transaction that signs it; the one
-- sequencer holding `log_sequencer`'s lease numbers pending leaves in `arrival` order, stores the
-- tree's hashes as Go's sumdb/tlog lays them out (`log_hashes`, indexed by StoredHashIndex: a
-- tile, a proof or a root reads a few rows, never every leaf) and signs checkpoints.
CREATE TABLE log_leaves (
  run_id text PRIMARY KEY,
  org_id text NOT NULL,
  subject_type text NOT NULL,
  subject_id text NOT NULL,
  root_hash text NOT NULL,
  event_count integer NOT NULL,
  -- The run's signed_at as the leaf data holds it: ISO 8601 UTC with milliseconds, kept as text
  -- so that the leaf hash never depends on a driver's timestamp parsing.
  closed_at text NOT NULL,
  arrival bigserial NOT NULL,
  leaf_index bigint UNIQUE,
  leaf_hash bytea
);
CREATE INDEX log_leaves_pending ON log_leaves (arrival) WHERE leaf_index IS NULL;

CREATE TABLE log_hashes (
  idx bigint PRIMARY KEY,
  hash bytea NOT NULL
);

CREATE TABLE log_checkpoints (
  tree_size bigint PRIMARY KEY,
  root_hash bytea NOT NULL,
  origin text NOT NULL,
  note text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- Every name the log signed under (SVC_LOG_ORIGIN may change): GET /api/v1/keys/platform lists a
-- verifier key for each name and platform key, so old checkpoints stay verifiable.
CREATE TABLE log_origins (
  origin text PRIMARY KEY,
  first_used timestamptz NOT NULL DEFAULT now()
);

-- One row: the sequencer's lease (taken over once expired: its holder stopped or was killed) and
-- the size of the tree the stored hashes describe.
CREATE TABLE log_sequencer (
  id integer PRIMARY KEY CHECK (id = 1),
  holder text,
  expires_at timestamptz NOT NULL DEFAULT '-infinity',
  tree_size bigint NOT NULL DEFAULT 0
);
INSERT INTO log_sequencer (id) VALUES (1);

-- Runs closed before the log existed are its first leaves, oldest first.
INSERT INTO log_leaves (run_id, org_id, subject_type, subject_id, root_hash, event_count, closed_at, arrival)
SELECT id, org_id, subject_type, job_id, root_hash, event_count,
       to_char(COALESCE(signed_at, updated_at) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
       row_number() OVER (ORDER BY COALESCE(signed_at, updated_at), created_at, id)
  FROM evidence_runs
 WHERE status = 'signed' AND root_hash IS NOT NULL;
SELECT setval(pg_get_serial_sequence('log_leaves', 'arrival'), COALESCE((SELECT max(arrival) FROM log_leaves), 0) + 1, false);

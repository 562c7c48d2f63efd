-- Locks of tus uploads shared by every server instance (modules/capture/upload-locks.ts): one row
-- per upload being written, held by one request of one instance until it unlocks or its lease ends.
CREATE TABLE capture_upload_locks (
  upload_id text PRIMARY KEY,
  holder text NOT NULL,
  expires_at timestamptz NOT NULL
);

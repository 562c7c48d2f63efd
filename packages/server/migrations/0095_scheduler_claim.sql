-- The claim's query (scheduler/store.ts pendingJobs): pending jobs oldest first by pending_at,
-- filtered by pool. jobs_pending orders by created_at, which a re-queued job keeps, so that query
-- sorted every pending row; this index hands them out in claim order and the LIMIT stops early.
CREATE INDEX jobs_pending_claim ON jobs (pending_at, id) WHERE status = 'pending';

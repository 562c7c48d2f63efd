-- The gateway requests still running: what the once-a-second sweep of abandoned requests reads
-- (gateway/orphans.ts), without a scan of every request ever made.
CREATE INDEX IF NOT EXISTS gateway_requests_running ON gateway_requests (created_at) WHERE status = 'running';
-- A node's lapsed gateway attempts: what each of its heartbeats reads to fail the ones it no longer
-- lists (work/store.ts failUnlistedLapsed).
CREATE INDEX IF NOT EXISTS work_items_node_lapsed ON work_items (node_id) WHERE status = 'lost' AND type <> 'job';

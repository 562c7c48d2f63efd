-- Fair knowledge ingestion (issue 40, docs/knowledge-bases.md "Fair turns"): when a document last
-- joined the ingestion queue (its upload, or the end of a turn it gave up for another
-- organization's document). A claim serves the organization with the fewest documents in progress
-- first, then the document that has waited longest.
ALTER TABLE kb_documents ADD COLUMN queued_at timestamptz NOT NULL DEFAULT now();
UPDATE kb_documents SET queued_at = created_at;
-- Documents in progress per organization (live leases), counted at every claim.
CREATE INDEX kb_documents_org_open ON kb_documents (org_id, lease_until) WHERE status = 'processing';

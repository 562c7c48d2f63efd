-- The embeddings requests made for a document's ingestion, found by the document they served, so
-- that an instance taking over an interrupted ingestion settles them before embedding again
-- (modules/knowledge/ingest.ts): nothing a crash left behind is paid twice.
CREATE INDEX gateway_requests_ingested_document ON gateway_requests ((metadata->'audit'->>'document_id'))
  WHERE metadata->'audit'->>'document_id' IS NOT NULL;

-- Knowledge bases: documents, their chunks and embeddings, and the provenance of each retrieval.
-- `kb_chunks.embedding` starts as real[] so this migration runs on any PostgreSQL. At start the
-- server turns it into pgvector's `vector` (with HNSW indexes) wherever the extension can be
-- created (modules/knowledge/vector-search.ts); where it cannot, search is exact, in SQL.
CREATE TABLE knowledge_bases (
  id text PRIMARY KEY,
  org_id text NOT NULL REFERENCES organizations(id),
  name text NOT NULL,
  description text,
  embedding_model text NOT NULL,
  chunk_size integer NOT NULL,
  chunk_overlap integer NOT NULL,
  created_by text NOT NULL REFERENCES buyers(id),
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX knowledge_bases_org ON knowledge_bases (org_id, created_at DESC);

-- One uploaded document. `status` is what clients see; `phase` is where ingestion stands.
-- Ingestion is leased (`lease_owner`, `lease_until`) so that a crashed instance's work is taken
-- over once the lease runs out; `attempts` counts the takes, and a document taken too often fails.
CREATE TABLE kb_documents (
  id text PRIMARY KEY,
  kb_id text NOT NULL REFERENCES knowledge_bases(id) ON DELETE CASCADE,
  org_id text NOT NULL REFERENCES organizations(id),
  name text NOT NULL,
  content_type text NOT NULL,
  bytes bigint NOT NULL,
  sha256 text NOT NULL,
  status text NOT NULL DEFAULT 'processing' CHECK (status IN ('processing', 'ready', 'failed')),
  phase text NOT NULL DEFAULT 'queued' CHECK (phase IN ('queued', 'extracting', 'embedding', 'done')),
  chunk_size integer NOT NULL,
  chunk_overlap integer NOT NULL,
  chunk_count integer NOT NULL DEFAULT 0,
  embedded_count integer NOT NULL DEFAULT 0,
  text_chars bigint,
  token_count bigint,
  pages integer,
  error text,
  attempts integer NOT NULL DEFAULT 0,
  lease_owner text,
  lease_until timestamptz,
  created_by text NOT NULL REFERENCES buyers(id),
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  completed_at timestamptz
);
CREATE INDEX kb_documents_kb ON kb_documents (kb_id, created_at);
CREATE INDEX kb_documents_open ON kb_documents (lease_until) WHERE status = 'processing';

-- A document's chunks. `model` repeats the knowledge base's embedding model so that each model
-- gets its own partial vector index. `embedded_by` is the gateway request (`emb-...`) whose
-- signed receipt covers this chunk's embedding.
CREATE TABLE kb_chunks (
  id text PRIMARY KEY,
  document_id text NOT NULL REFERENCES kb_documents(id) ON DELETE CASCADE,
  kb_id text NOT NULL,
  model text NOT NULL,
  ordinal integer NOT NULL,
  text text NOT NULL,
  sha256 text NOT NULL,
  tokens integer NOT NULL,
  char_start integer NOT NULL,
  char_end integer NOT NULL,
  embedding real[],
  embedded_by text,
  UNIQUE (document_id, ordinal)
);
CREATE INDEX kb_chunks_kb ON kb_chunks (kb_id) WHERE embedding IS NOT NULL;
CREATE INDEX kb_chunks_pending ON kb_chunks (document_id, ordinal) WHERE embedding IS NULL;

-- Exact search where pgvector is absent: the cosine similarity of two unit vectors is their dot product.
CREATE FUNCTION kb_dot(a real[], b real[]) RETURNS double precision
  LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
  AS $$ SELECT sum(x::double precision * y) FROM unnest(a, b) AS t(x, y) $$;

-- What a grounded chat request retrieved, one row per chunk, kept after the chunk or its document
-- is deleted: the provenance recorded in the receipt's metadata and the request's evidence.
CREATE TABLE kb_retrievals (
  request_id text NOT NULL,
  rank integer NOT NULL,
  org_id text NOT NULL REFERENCES organizations(id),
  kb_id text NOT NULL,
  document_id text NOT NULL,
  chunk_id text NOT NULL,
  chunk_sha256 text NOT NULL,
  score double precision NOT NULL,
  query_request_id text,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (request_id, rank)
);

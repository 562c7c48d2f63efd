import type { Queryable } from '../../platform/db/index.js';
import { vectorCast, vectorParam, type VectorSearch } from './vector-search.js';

/** SQL of knowledge bases, documents, chunks and retrievals (migration 0008). */

export interface KnowledgeBaseRow {
  id: string;
  org_id: string;
  name: string;
  description: string | null;
  embedding_model: string;
  chunk_size: number;
  chunk_overlap: number;
  created_by: string;
  created_at: Date;
  document_count: number;
  chunk_count: number;
}

export type DocumentStatus = 'processing' | 'ready' | 'failed';
export type DocumentPhase = 'queued' | 'extracting' | 'embedding' | 'done';

export interface DocumentRow {
  id: string;
  kb_id: string;
  org_id: string;
  name: string;
  content_type: string;
  bytes: number;
  sha256: string;
  status: DocumentStatus;
  phase: DocumentPhase;
  chunk_size: number;
  chunk_overlap: number;
  chunk_count: number;
  embedded_count: number;
  text_chars: number | null;
  token_count: number | null;
  pages: number | null;
  error: string | null;
  attempts: number;
  lease_owner: string | null;
  lease_until: Date | null;
  /** When the document last joined the ingestion queue: its upload, or a turn it gave up. */
  queued_at: Date;
  created_by: string;
  created_at: Date;
  updated_at: Date;
  completed_at: Date | null;
}

const KB_COLUMNS = `k.*,
  (SELECT count(*) FROM kb_documents d WHERE d.kb_id = k.id)::int AS document_count,
  (SELECT coalesce(sum(d.chunk_count), 0) FROM kb_documents d WHERE d.kb_id = k.id AND d.status = 'ready')::int AS chunk_count`;

export async function insertKnowledgeBase(
  db: Queryable,
  kb: Omit<KnowledgeBaseRow, 'created_at' | 'document_count' | 'chunk_count'>,
): Promise<KnowledgeBaseRow> {
  await db.query(
    `INSERT INTO knowledge_bases (id, org_id, name, description, embedding_model, chunk_size, chunk_overlap, created_by)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
    [kb.id, kb.org_id, kb.name, kb.description, kb.embedding_model, kb.chunk_size, kb.chunk_overlap, kb.created_by],
  );
  const created = await findKnowledgeBase(db, kb.org_id, kb.id);
  if (!created) throw new Error(`knowledge base ${kb.id} vanished after insert`);
  return created;
}

/** One knowledge base of an organization; another organization's is not found. */
export async function findKnowledgeBase(
  db: Queryable,
  orgId: string,
  id: string,
): Promise<KnowledgeBaseRow | undefined> {
  const { rows } = await db.query<KnowledgeBaseRow>(
    `SELECT ${KB_COLUMNS} FROM knowledge_bases k WHERE k.id = $1 AND k.org_id = $2`,
    [id, orgId],
  );
  return rows[0];
}

export async function listKnowledgeBases(
  db: Queryable,
  orgId: string,
  page: { limit: number; offset: number },
): Promise<{ rows: KnowledgeBaseRow[]; total: number }> {
  const [list, count] = await Promise.all([
    db.query<KnowledgeBaseRow>(
      `SELECT ${KB_COLUMNS} FROM knowledge_bases k WHERE k.org_id = $1 ORDER BY k.created_at DESC, k.id DESC LIMIT $2 OFFSET $3`,
      [orgId, page.limit, page.offset],
    ),
    db.query<{ n: number }>('SELECT count(*)::int AS n FROM knowledge_bases WHERE org_id = $1', [orgId]),
  ]);
  return { rows: list.rows, total: count.rows[0]?.n ?? 0 };
}

/** Deletes a knowledge base with its documents and chunks; returns the ids of the documents it had. */
export async function deleteKnowledgeBase(db: Queryable, orgId: string, id: string): Promise<string[] | undefined> {
  const docs = await db.query<{ id: string }>('SELECT id FROM kb_documents WHERE kb_id = $1 AND org_id = $2', [
    id,
    orgId,
  ]);
  const { rowCount } = await db.query('DELETE FROM knowledge_bases WHERE id = $1 AND org_id = $2', [id, orgId]);
  return rowCount === 1 ? docs.rows.map((r) => r.id) : undefined;
}

export async function insertDocument(
  db: Queryable,
  d: Pick<
    DocumentRow,
    | 'id'
    | 'kb_id'
    | 'org_id'
    | 'name'
    | 'content_type'
    | 'bytes'
    | 'sha256'
    | 'chunk_size'
    | 'chunk_overlap'
    | 'created_by'
  >,
): Promise<DocumentRow> {
  const { rows } = await db.query<DocumentRow>(
    `INSERT INTO kb_documents (id, kb_id, org_id, name, content_type, bytes, sha256, chunk_size, chunk_overlap, created_by)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING *`,
    [d.id, d.kb_id, d.org_id, d.name, d.content_type, d.bytes, d.sha256, d.chunk_size, d.chunk_overlap, d.created_by],
  );
  const row = rows[0];
  if (!row) throw new Error(`document ${d.id} was not inserted`);
  return row;
}

export async function findDocument(
  db: Queryable,
  orgId: string,
  kbId: string,
  id: string,
): Promise<DocumentRow | undefined> {
  const { rows } = await db.query<DocumentRow>(
    'SELECT * FROM kb_documents WHERE id = $1 AND kb_id = $2 AND org_id = $3',
    [id, kbId, orgId],
  );
  return rows[0];
}

export async function documentById(db: Queryable, id: string): Promise<DocumentRow | undefined> {
  const { rows } = await db.query<DocumentRow>('SELECT * FROM kb_documents WHERE id = $1', [id]);
  return rows[0];
}

export async function listDocuments(
  db: Queryable,
  kbId: string,
  page: { limit: number; offset: number; status?: DocumentStatus | undefined },
): Promise<{ rows: DocumentRow[]; total: number }> {
  const filter = page.status ? ' AND status = $2' : '';
  const params: unknown[] = page.status ? [kbId, page.status] : [kbId];
  const n = params.length;
  const [list, count] = await Promise.all([
    db.query<DocumentRow>(
      `SELECT * FROM kb_documents WHERE kb_id = $1${filter} ORDER BY created_at, id LIMIT $${n + 1} OFFSET $${n + 2}`,
      [...params, page.limit, page.offset],
    ),
    db.query<{ n: number }>(`SELECT count(*)::int AS n FROM kb_documents WHERE kb_id = $1${filter}`, params),
  ]);
  return { rows: list.rows, total: count.rows[0]?.n ?? 0 };
}

export async function deleteDocument(db: Queryable, orgId: string, kbId: string, id: string): Promise<boolean> {
  const { rowCount } = await db.query('DELETE FROM kb_documents WHERE id = $1 AND kb_id = $2 AND org_id = $3', [
    id,
    kbId,
    orgId,
  ]);
  return rowCount === 1;
}

/** Documents of the organization `org` (an SQL expression) whose ingestion some instance holds now. */
const inProgress = (org: string) =>
  `(SELECT count(*) FROM kb_documents l WHERE l.org_id = ${org} AND l.status = 'processing' AND l.lease_until >= now())`;

/** A document waiting for ingestion: never taken, given back, or left by an instance that stopped. */
const WAITING = "d.status = 'processing' AND (d.lease_until IS NULL OR d.lease_until < now())";

/**
 * Takes a document waiting for ingestion, for `leaseSeconds`, in fair order: first the
 * organization with the fewest documents in progress on any instance, then the document that has
 * waited longest (`queued_at`). `attempts` counts every take.
 */
export async function claimDocument(
  db: Queryable,
  owner: string,
  leaseSeconds: number,
  onlyId?: string,
): Promise<DocumentRow | undefined> {
  const { rows } = await db.query<DocumentRow>(
    `UPDATE kb_documents SET lease_owner = $1, lease_until = now() + make_interval(secs => $2), attempts = attempts + 1, updated_at = now()
      WHERE id = (SELECT d.id FROM kb_documents d
                   WHERE ${WAITING} ${onlyId ? 'AND d.id = $3' : ''}
                   ORDER BY ${inProgress('d.org_id')}, d.queued_at, d.created_at, d.id LIMIT 1 FOR UPDATE OF d SKIP LOCKED)
      RETURNING *`,
    onlyId ? [owner, leaseSeconds, onlyId] : [owner, leaseSeconds],
  );
  return rows[0];
}

/**
 * Whether a document of another organization waits while its organization has fewer documents in
 * progress than `orgId`: then a document of `orgId` whose turn has lasted long enough gives it up.
 */
export async function fairerTurnWaiting(db: Queryable, orgId: string): Promise<boolean> {
  const { rows } = await db.query<{ waiting: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM kb_documents d
                     WHERE ${WAITING} AND d.org_id <> $1 AND ${inProgress('d.org_id')} < ${inProgress('$1')}) AS waiting`,
    [orgId],
  );
  return rows[0]?.waiting === true;
}

/** Renews a lease and records progress; false when the lease was lost or the document deleted. */
export async function renewLease(
  db: Queryable,
  id: string,
  owner: string,
  leaseSeconds: number,
  set: Partial<Pick<DocumentRow, 'phase' | 'chunk_count' | 'text_chars' | 'token_count' | 'pages'>> = {},
): Promise<boolean> {
  const fields = Object.entries(set).filter(([, v]) => v !== undefined);
  const assignments = fields.map(([k], i) => `${k} = $${i + 4}`).join(', ');
  const { rowCount } = await db.query(
    `UPDATE kb_documents SET lease_until = now() + make_interval(secs => $3), updated_at = now()${assignments ? `, ${assignments}` : ''}
      WHERE id = $1 AND lease_owner = $2 AND status = 'processing'`,
    [id, owner, leaseSeconds, ...fields.map(([, v]) => v)],
  );
  return rowCount === 1;
}

/**
 * Lets another instance (or this one) take the document at once. A graceful stop is not an
 * interruption: the take it ends is not counted against the document. With `requeue` (a turn
 * given up for another organization's document) it goes to the back of the queue.
 */
export async function releaseLease(
  db: Queryable,
  id: string,
  owner: string,
  options: { requeue?: boolean } = {},
): Promise<void> {
  await db.query(
    `UPDATE kb_documents SET lease_owner = NULL, lease_until = NULL, attempts = greatest(attempts - 1, 0)${options.requeue ? ', queued_at = now()' : ''}
      WHERE id = $1 AND lease_owner = $2 AND status = 'processing'`,
    [id, owner],
  );
}

/**
 * Ends ingestion: `ready`, or `failed` with the reason, when its chunks are dropped (a failed
 * document is never searched; its counts stay as they were). Only the lease holder may (when
 * `owner` is given). Call it inside a transaction.
 */
export async function finishDocument(
  db: Queryable,
  id: string,
  end: { status: 'ready' | 'failed'; error?: string; owner?: string },
): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE kb_documents SET status = $2, phase = CASE WHEN $2 = 'ready' THEN 'done' ELSE phase END, error = $3,
            lease_owner = NULL, lease_until = NULL, updated_at = now(), completed_at = now()
      WHERE id = $1 AND status = 'processing' ${end.owner ? 'AND lease_owner = $4' : ''}`,
    end.owner ? [id, end.status, end.error ?? null, end.owner] : [id, end.status, end.error ?? null],
  );
  if (rowCount === 1 && end.status === 'failed') await db.query('DELETE FROM kb_chunks WHERE document_id = $1', [id]);
  return rowCount === 1;
}

export interface NewChunk {
  id: string;
  ordinal: number;
  text: string;
  sha256: string;
  tokens: number;
  char_start: number;
  char_end: number;
}

/** Replaces a document's chunks (a retried extraction starts over), in batches of rows. */
export async function replaceChunks(
  db: Queryable,
  doc: Pick<DocumentRow, 'id' | 'kb_id'>,
  model: string,
  chunks: readonly NewChunk[],
): Promise<void> {
  await db.query('DELETE FROM kb_chunks WHERE document_id = $1', [doc.id]);
  const perRow = 10;
  for (let i = 0; i < chunks.length; i += 500) {
    const batch = chunks.slice(i, i + 500);
    const values = batch
      .map((_, j) => `(${Array.from({ length: perRow }, (_x, k) => `$${j * perRow + k + 1}`).join(', ')})`)
      .join(', ');
    const params = batch.flatMap((c) => [
      c.id,
      doc.id,
      doc.kb_id,
      model,
      String(c.ordinal),
      c.text,
      c.sha256,
      String(c.tokens),
      String(c.char_start),
      String(c.char_end),
    ]);
    await db.query(
      `INSERT INTO kb_chunks (id, document_id, kb_id, model, ordinal, text, sha256, tokens, char_start, char_end)
       SELECT v.id, v.document_id, v.kb_id, v.model, v.ordinal::int, v.text, v.sha256, v.tokens::int, v.char_start::int, v.char_end::int
         FROM (VALUES ${values}) AS v(id, document_id, kb_id, model, ordinal, text, sha256, tokens, char_start, char_end)`,
      params,
    );
  }
}

/** The next chunks of a document still without an embedding, skipping those in flight. */
export async function pendingChunks(
  db: Queryable,
  documentId: string,
  limit: number,
  skip: readonly string[],
): Promise<{ id: string; text: string }[]> {
  const { rows } = await db.query<{ id: string; text: string }>(
    `SELECT id, text FROM kb_chunks WHERE document_id = $1 AND embedding IS NULL ${skip.length > 0 ? 'AND NOT (id = ANY($3::text[]))' : ''} ORDER BY ordinal LIMIT $2`,
    skip.length > 0 ? [documentId, limit, `{${skip.join(',')}}`] : [documentId, limit],
  );
  return rows;
}

/** An embeddings request made for a document's ingestion whose chunks still wait for their vectors. */
export interface UnsettledBatch {
  id: string;
  status: 'running' | 'completed';
  model: string;
  work_id: string | null;
  /** The batch's chunks in request order (the result's order). */
  chunk_ids: string[];
  /** Those of them still without an embedding. */
  pending: string[];
}

/**
 * The document's ingestion requests that are still running, or that completed (and were paid)
 * without their vectors being stored: what an interrupted instance left behind.
 */
export async function unsettledBatches(db: Queryable, orgId: string, documentId: string): Promise<UnsettledBatch[]> {
  const { rows } = await db.query<UnsettledBatch>(
    `SELECT g.id, g.status, g.model, g.work_id, ids.chunk_ids,
            ARRAY(SELECT c.id FROM kb_chunks c WHERE c.document_id = $2 AND c.embedding IS NULL AND c.id = ANY(ids.chunk_ids)) AS pending
       FROM gateway_requests g,
            LATERAL (SELECT ARRAY(SELECT jsonb_array_elements_text(g.metadata->'audit'->'chunk_ids')) AS chunk_ids) ids
      WHERE g.org_id = $1 AND g.metadata->'audit'->>'document_id' = $2 AND g.status IN ('running', 'completed')
      ORDER BY g.created_at`,
    [orgId, documentId],
  );
  return rows.filter((r) => r.status === 'running' || r.pending.length > 0);
}

/** Stores embeddings (unit vectors) and the request that made them; returns the document's embedded count. */
export async function storeEmbeddings(
  db: Queryable,
  search: Pick<VectorSearch, 'column'>,
  documentId: string,
  requestId: string,
  rows: readonly { id: string; embedding: readonly number[] }[],
): Promise<number> {
  if (rows.length > 0) {
    // Vectors go as binary parameters, typed where they appear so the server reads them as such.
    const cast = vectorCast(search);
    const values = rows.map((_, i) => `($${i * 2 + 3}, $${i * 2 + 4}::${cast})`).join(', ');
    await db.query(
      `UPDATE kb_chunks c SET embedding = v.e, embedded_by = $2
         FROM (VALUES ${values}) AS v(id, e) WHERE c.id = v.id AND c.document_id = $1`,
      [documentId, requestId, ...rows.flatMap((r) => [r.id, vectorParam(search, r.embedding)])],
    );
  }
  const { rows: counted } = await db.query<{ n: number }>(
    `UPDATE kb_documents SET embedded_count = (SELECT count(*) FROM kb_chunks WHERE document_id = $1 AND embedding IS NOT NULL), updated_at = now()
      WHERE id = $1 RETURNING embedded_count AS n`,
    [documentId],
  );
  return counted[0]?.n ?? 0;
}

/** One retrieved chunk of a grounded request (rank 1 is the best). */
export interface RetrievalRow {
  request_id: string;
  rank: number;
  org_id: string;
  kb_id: string;
  document_id: string;
  chunk_id: string;
  chunk_sha256: string;
  score: number;
  query_request_id: string | null;
  created_at: Date;
}

export async function insertRetrievals(
  db: Queryable,
  rows: readonly Omit<RetrievalRow, 'created_at'>[],
): Promise<void> {
  if (rows.length === 0) return;
  const perRow = 9;
  const values = rows
    .map((_, i) => `(${Array.from({ length: perRow }, (_x, k) => `$${i * perRow + k + 1}`).join(', ')})`)
    .join(', ');
  await db.query(
    `INSERT INTO kb_retrievals (request_id, rank, org_id, kb_id, document_id, chunk_id, chunk_sha256, score, query_request_id)
     SELECT v.request_id, v.rank::int, v.org_id, v.kb_id, v.document_id, v.chunk_id, v.chunk_sha256, v.score::double precision, v.query_request_id
       FROM (VALUES ${values}) AS v(request_id, rank, org_id, kb_id, document_id, chunk_id, chunk_sha256, score, query_request_id)`,
    rows.flatMap((r) => [
      r.request_id,
      String(r.rank),
      r.org_id,
      r.kb_id,
      r.document_id,
      r.chunk_id,
      r.chunk_sha256,
      String(r.score),
      r.query_request_id,
    ]),
  );
}

export async function retrievalRows(db: Queryable, requestId: string): Promise<RetrievalRow[]> {
  const { rows } = await db.query<RetrievalRow>('SELECT * FROM kb_retrievals WHERE request_id = $1 ORDER BY rank', [
    requestId,
  ]);
  return rows;
}

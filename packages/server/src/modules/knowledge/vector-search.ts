import { modelsOfType } from '@svc/protocol';
import type { Db, Queryable } from '../../platform/db/index.js';

/**
 * Vector search over knowledge-base chunks, the same SQL on PGlite and PostgreSQL. With pgvector
 * (bundled with PGlite; shipped by every major managed PostgreSQL) the `embedding` column is a
 * `vector` with one HNSW index (cosine) per embedding model; without it the column stays `real[]`
 * and search is exact: every chunk of the knowledge base is scored in SQL (`kb_dot`). Vectors are
 * stored at unit length, so the score is the cosine similarity either way.
 */
export interface VectorSearch {
  /** `hnsw`: pgvector's approximate index; `exact`: a full scan of the knowledge base. */
  mode: 'hnsw' | 'exact';
  /** The `kb_chunks.embedding` column type. */
  column: 'vector' | 'array';
  /** The installed pgvector version, or null. */
  pgvector: string | null;
  /** Why search is exact, when it is: the warning logged at start. */
  reason?: string;
}

/** Any fixed number: instances starting together convert the column and build indexes once. */
const PREPARE_LOCK = 5_318_009;

const EMBEDDING_MODELS = () => modelsOfType('embeddings').map((m) => ({ id: m.id, dimensions: m.dimensions ?? 0 }));

function indexName(model: string): string {
  return `kb_chunks_hnsw_${model.toLowerCase().replace(/[^a-z0-9]+/g, '_')}`;
}

/** A catalogue model id as an SQL literal: partial indexes only match literal predicates. */
function modelLiteral(model: string): string {
  if (!/^[A-Za-z0-9._-]+$/.test(model)) throw new Error(`unexpected model id ${model}`);
  return `'${model}'`;
}

function dimensionsOf(model: string): number {
  const found = EMBEDDING_MODELS().find((m) => m.id === model);
  if (!found || !Number.isInteger(found.dimensions) || found.dimensions <= 0)
    throw new Error(`${model} is not a catalogue embeddings model`);
  return found.dimensions;
}

async function columnKind(db: Queryable): Promise<'vector' | 'array'> {
  const { rows } = await db.query<{ type: string }>(
    "SELECT format_type(atttypid, atttypmod) AS type FROM pg_attribute WHERE attrelid = 'kb_chunks'::regclass AND attname = 'embedding'",
  );
  return rows[0]?.type === 'vector' ? 'vector' : 'array';
}

async function pgvectorVersion(db: Queryable): Promise<string | null> {
  const { rows } = await db.query<{ v: string }>("SELECT extversion AS v FROM pg_extension WHERE extname = 'vector'");
  return rows[0]?.v ?? null;
}

/** Whether pgvector's iterative index scans (0.8.0+) exist: filtered searches then still find k rows. */
function hasIterativeScan(version: string | null): boolean {
  const [major = 0, minor = 0] = (version ?? '0.0').split('.').map(Number);
  return major > 0 || minor >= 8;
}

/**
 * Brings the store to the best search it supports, once per start (under a lock, so several
 * instances agree): creates pgvector where it is available and allowed, converts the column and
 * builds the HNSW indexes. With `wanted: 'exact'` it leaves the column as it is and searches exactly.
 *
 * @example
 * const search = await prepareVectorSearch(db, 'auto');
 * if (search.mode === 'exact') log.warn(search.reason);
 */
export async function prepareVectorSearch(db: Db, wanted: 'auto' | 'exact'): Promise<VectorSearch> {
  return db.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [PREPARE_LOCK]);
    let column = await columnKind(tx);
    let version = await pgvectorVersion(tx);
    if (wanted === 'exact') return { mode: 'exact', column, pgvector: version, reason: 'SVC_KB_VECTOR_SEARCH=exact' };
    let reason: string | undefined;
    if (!version) {
      const available = await tx.query("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'");
      if (available.rows.length === 0) {
        reason = 'the pgvector extension is not installed on this PostgreSQL server';
      } else {
        await tx.query('SAVEPOINT kb_vector');
        try {
          await tx.query('CREATE EXTENSION IF NOT EXISTS vector');
          await tx.query('RELEASE SAVEPOINT kb_vector');
        } catch (err) {
          await tx.query('ROLLBACK TO SAVEPOINT kb_vector');
          reason = `CREATE EXTENSION vector failed (${err instanceof Error ? err.message : String(err)}); a superuser can run it once`;
        }
        version = await pgvectorVersion(tx);
      }
    }
    if (!version) return { mode: 'exact', column, pgvector: null, reason: reason ?? 'pgvector is not available' };
    if (column === 'array') {
      await tx.query('ALTER TABLE kb_chunks ALTER COLUMN embedding TYPE vector USING embedding::vector');
      column = 'vector';
    }
    for (const model of EMBEDDING_MODELS()) {
      await tx.query(
        `CREATE INDEX IF NOT EXISTS ${indexName(model.id)} ON kb_chunks USING hnsw ((embedding::vector(${model.dimensions})) vector_cosine_ops) WHERE model = ${modelLiteral(model.id)}`,
      );
    }
    return { mode: 'hnsw', column, pgvector: version };
  });
}

/** A vector scaled to unit length (cosine similarity becomes a dot product); a zero vector stays zero. */
export function unitVector(vector: readonly number[]): number[] {
  const norm = Math.sqrt(vector.reduce((sum, x) => sum + x * x, 0));
  return norm === 0 ? vector.map(() => 0) : vector.map((x) => x / norm);
}

/** The SQL literal of a vector for the column's type, to be cast with {@link vectorCast}. */
export function vectorLiteral(search: Pick<VectorSearch, 'column'>, vector: readonly number[]): string {
  const body = vector.map((x) => (Number.isFinite(x) ? String(x) : '0')).join(',');
  return search.column === 'vector' ? `[${body}]` : `{${body}}`;
}

/** PostgreSQL's type oid of `real` (float4), in the binary form of a `real[]`. */
const FLOAT4_OID = 700;

/**
 * A vector as a binary query parameter for the column's type (cast it with {@link vectorCast}
 * where the parameter appears, so that the server reads it with that type's binary input): pgvector's
 * `vector` (int16 dimensions, int16 zero, float4s) or a one-dimensional `real[]` (PostgreSQL's
 * array format). Non-finite values become 0, as in {@link vectorLiteral}. Ingestion stores
 * thousands of vectors: printing and parsing each float as text cost about ten times more CPU in
 * the store than reading four bytes (bench/README.md, "Knowledge ingestion").
 *
 * @example
 * await db.query('UPDATE kb_chunks SET embedding = $2::vector WHERE id = $1', [id, vectorParam(search, v)]);
 */
export function vectorParam(search: Pick<VectorSearch, 'column'>, vector: readonly number[]): Buffer {
  const n = vector.length;
  const value = (i: number) => {
    const x = vector[i] ?? 0;
    return Number.isFinite(x) ? x : 0;
  };
  if (search.column === 'vector') {
    const out = Buffer.allocUnsafe(4 + 4 * n);
    out.writeInt16BE(n, 0);
    out.writeInt16BE(0, 2);
    for (let i = 0; i < n; i++) out.writeFloatBE(value(i), 4 + 4 * i);
    return out;
  }
  // ndim, has-nulls flag, element type (float4), then the one dimension's length and lower bound;
  // each element is its byte length (4) and its value.
  const out = Buffer.allocUnsafe(20 + 8 * n);
  out.writeInt32BE(1, 0);
  out.writeInt32BE(0, 4);
  out.writeInt32BE(FLOAT4_OID, 8);
  out.writeInt32BE(n, 12);
  out.writeInt32BE(1, 16);
  for (let i = 0; i < n; i++) {
    out.writeInt32BE(4, 20 + 8 * i);
    out.writeFloatBE(value(i), 24 + 8 * i);
  }
  return out;
}

export function vectorCast(search: Pick<VectorSearch, 'column'>): string {
  return search.column === 'vector' ? 'vector' : 'real[]';
}

export interface ChunkHit {
  chunk_id: string;
  document_id: string;
  document_name: string;
  chunk_index: number;
  text: string;
  sha256: string;
  score: number;
}

/**
 * The `topK` chunks of a knowledge base nearest to `query` (a unit vector), best first, with
 * their cosine similarity. HNSW mode runs inside a transaction to set the search breadth
 * (`hnsw.ef_search`) and, on pgvector 0.8+, iterative scans, so that the knowledge-base filter
 * still yields `topK` rows when other knowledge bases share the index.
 *
 * @example
 * const hits = await searchChunks(db, search, { kbId, model: 'all-MiniLM-L6-v2', query: unitVector(v), topK: 5 });
 */
export async function searchChunks(
  db: Db,
  search: VectorSearch,
  q: { kbId: string; model: string; query: readonly number[]; topK: number },
): Promise<ChunkHit[]> {
  const dims = dimensionsOf(q.model);
  if (q.query.length !== dims)
    throw new Error(`a ${q.model} query vector has ${dims} dimensions, not ${q.query.length}`);
  const columns = 'n.chunk_id, n.document_id, d.name AS document_name, n.chunk_index, n.text, n.sha256';
  if (search.mode === 'exact') {
    const { rows } = await db.query<ChunkHit>(
      `WITH nearest AS MATERIALIZED (
         SELECT c.id AS chunk_id, c.document_id, c.ordinal AS chunk_index, c.text, c.sha256, kb_dot(c.embedding::real[], $1::real[]) AS score
           FROM kb_chunks c WHERE c.kb_id = $2 AND c.embedding IS NOT NULL
          ORDER BY score DESC, c.id LIMIT $3)
       SELECT ${columns}, n.score FROM nearest n JOIN kb_documents d ON d.id = n.document_id ORDER BY n.score DESC, n.chunk_id`,
      [vectorLiteral({ column: 'array' }, q.query), q.kbId, q.topK],
    );
    return rows;
  }
  const expr = `c.embedding::vector(${dims}) <=> $1::vector(${dims})`;
  return db.transaction(async (tx) => {
    await tx.query(`SET LOCAL hnsw.ef_search = ${Math.max(40, Math.min(1000, q.topK * 2))}`);
    if (hasIterativeScan(search.pgvector)) await tx.query('SET LOCAL hnsw.iterative_scan = relaxed_order');
    const { rows } = await tx.query<ChunkHit>(
      `WITH nearest AS MATERIALIZED (
         SELECT c.id AS chunk_id, c.document_id, c.ordinal AS chunk_index, c.text, c.sha256, ${expr} AS distance
           FROM kb_chunks c WHERE c.model = ${modelLiteral(q.model)} AND c.kb_id = $2 AND c.embedding IS NOT NULL
          ORDER BY ${expr} LIMIT $3)
       SELECT ${columns}, 1 - n.distance AS score FROM nearest n JOIN kb_documents d ON d.id = n.document_id ORDER BY n.distance, n.chunk_id`,
      [vectorLiteral({ column: 'vector' }, q.query), q.kbId, q.topK],
    );
    return rows;
  });
}

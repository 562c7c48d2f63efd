import { modelsOfType } from '@svc/protocol';
import { Type } from '@sinclair/typebox';
import { StringEnum } from '../../platform/schemas.js';
import { DOCUMENT_FORMATS } from './extract.js';

/** Wire shapes of knowledge bases (docs/knowledge-bases.md). Requests refuse unknown fields. */

const embeddingModels = modelsOfType('embeddings').map((m) => m.id);

export const KB_ID = '^kb_[0-9a-z]{26}$';
export const DOC_ID = '^doc_[0-9a-z]{26}$';

export const KbParams = Type.Object({ id: Type.String({ pattern: KB_ID, description: 'knowledge base id (kb_...)' }) });
export const DocParams = Type.Object({
  id: Type.String({ pattern: KB_ID, description: 'knowledge base id (kb_...)' }),
  document_id: Type.String({ pattern: DOC_ID, description: 'document id (doc_...)' }),
});

export const Paging = {
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
  offset: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000, default: 0 })),
};

export const CreateKnowledgeBaseRequest = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 200 }),
    description: Type.Optional(Type.String({ maxLength: 2000 })),
    embedding_model: Type.Optional(
      StringEnum(embeddingModels, { default: 'all-MiniLM-L6-v2', description: 'a catalogue embeddings model' }),
    ),
    chunk_size: Type.Optional(
      Type.Integer({
        minimum: 32,
        maximum: 2048,
        default: 200,
        description: 'most tokens in a chunk (cl100k_base tokens)',
      }),
    ),
    chunk_overlap: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: 1024,
        default: 40,
        description: 'tokens of whole sentences repeated between consecutive chunks; at most chunk_size / 2',
      }),
    ),
  },
  { $id: 'CreateKnowledgeBaseRequest', additionalProperties: false },
);

export const KnowledgeBase = Type.Object(
  {
    id: Type.String(),
    object: Type.Literal('knowledge_base'),
    name: Type.String(),
    description: Type.Union([Type.String(), Type.Null()]),
    embedding_model: Type.String(),
    dimensions: Type.Integer(),
    chunk_size: Type.Integer(),
    chunk_overlap: Type.Integer(),
    document_count: Type.Integer(),
    chunk_count: Type.Integer({ description: 'chunks of ready documents' }),
    search: StringEnum(['hnsw', 'exact'] as const, {
      description: 'hnsw: pgvector index; exact: every chunk scored (no pgvector on this store)',
    }),
    created_at: Type.String({ format: 'date-time' }),
  },
  { $id: 'KnowledgeBase' },
);

export const KnowledgeBaseList = Type.Object(
  {
    knowledge_bases: Type.Array(Type.Ref(KnowledgeBase)),
    total: Type.Integer(),
    limit: Type.Integer(),
    offset: Type.Integer(),
  },
  { $id: 'KnowledgeBaseList' },
);

export const UploadDocumentRequest = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 256 }),
    text: Type.String({ minLength: 1, description: 'the document itself' }),
    content_type: Type.Optional(
      StringEnum(['text/plain', 'text/markdown', 'text/html'] as const, {
        description: "default: from the name's extension, else text/plain",
      }),
    ),
  },
  { $id: 'UploadDocumentRequest', additionalProperties: false },
);

export const KbDocument = Type.Object(
  {
    id: Type.String(),
    object: Type.Literal('knowledge_base.document'),
    knowledge_base_id: Type.String(),
    name: Type.String(),
    content_type: StringEnum(DOCUMENT_FORMATS),
    bytes: Type.Integer(),
    sha256: Type.String({ description: 'SHA-256 (hex) of the uploaded bytes' }),
    status: StringEnum(['processing', 'ready', 'failed'] as const),
    phase: StringEnum(['queued', 'extracting', 'embedding', 'done'] as const, {
      description: 'where ingestion stands while processing',
    }),
    chunk_count: Type.Integer({ description: 'chunks the document was cut into (0 until extracted)' }),
    embedded_count: Type.Integer({ description: 'chunks embedded so far' }),
    progress: Type.Number({ description: 'embedded_count / chunk_count, 1 when ready' }),
    text_chars: Type.Union([Type.Integer(), Type.Null()]),
    token_count: Type.Union([Type.Integer(), Type.Null()]),
    pages: Type.Union([Type.Integer(), Type.Null()], { description: 'PDF pages' }),
    error: Type.Union([Type.String(), Type.Null()], { description: 'why it failed' }),
    created_at: Type.String({ format: 'date-time' }),
    updated_at: Type.String({ format: 'date-time' }),
    completed_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  },
  { $id: 'KbDocument' },
);

export const KbDocumentList = Type.Object(
  { documents: Type.Array(Type.Ref(KbDocument)), total: Type.Integer(), limit: Type.Integer(), offset: Type.Integer() },
  { $id: 'KbDocumentList' },
);

export const Deleted = Type.Object({ id: Type.String(), deleted: Type.Literal(true) }, { $id: 'KbDeleted' });

export const SearchRequest = Type.Object(
  {
    query: Type.String({ minLength: 1, maxLength: 8000 }),
    top_k: Type.Optional(Type.Integer({ minimum: 1, maximum: 50, default: 5 })),
  },
  { $id: 'KbSearchRequest', additionalProperties: false },
);

export const SearchResponse = Type.Object(
  {
    object: Type.Literal('list'),
    knowledge_base_id: Type.String(),
    model: Type.String(),
    search: StringEnum(['hnsw', 'exact'] as const),
    query_request_id: Type.String({
      description: 'the embeddings request that embedded the query (its receipt: GET /api/v1/job/receipts/{id})',
    }),
    results: Type.Array(
      Type.Object({
        document_id: Type.String(),
        document_name: Type.String(),
        chunk_id: Type.String(),
        chunk_index: Type.Integer(),
        score: Type.Number({ description: 'cosine similarity, higher is nearer' }),
        sha256: Type.String({ description: 'SHA-256 (hex) of the chunk text' }),
        text: Type.String(),
      }),
    ),
  },
  { $id: 'KbSearchResponse' },
);

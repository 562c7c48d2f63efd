import { createHash } from 'node:crypto';
import { findModel } from '@svc/protocol';
import type { Static } from '@sinclair/typebox';
import type { ServiceContext } from '../../service-context.js';
import { ApiError } from '../../platform/errors.js';
import { newId } from '../../platform/ids.js';
import type { Principal } from '../../platform/principal.js';
import { detectFormat } from './extract.js';
import { sourceKey } from './ingest.js';
import { knowledgeBaseOf, searchKnowledgeBase } from './retrieval.js';
import type { CreateKnowledgeBaseRequest, SearchRequest } from './schemas.js';
import * as store from './store.js';

/** The rules of knowledge bases and their documents; HTTP is in routes.ts, SQL in store.ts. */

export const DEFAULT_EMBEDDING_MODEL = 'all-MiniLM-L6-v2';
export const DEFAULT_CHUNK_SIZE = 200;
export const DEFAULT_CHUNK_OVERLAP = 40;
export const DEFAULT_SEARCH_TOP_K = 5;

const iso = (d: Date | string) => new Date(d).toISOString();

export function knowledgeBaseView(ctx: Pick<ServiceContext, 'vectorSearch'>, kb: store.KnowledgeBaseRow) {
  return {
    id: kb.id,
    object: 'knowledge_base' as const,
    name: kb.name,
    description: kb.description,
    embedding_model: kb.embedding_model,
    dimensions: findModel(kb.embedding_model)?.dimensions ?? 0,
    chunk_size: kb.chunk_size,
    chunk_overlap: kb.chunk_overlap,
    document_count: kb.document_count,
    chunk_count: kb.chunk_count,
    search: ctx.vectorSearch.mode,
    created_at: iso(kb.created_at),
  };
}

export function documentView(d: store.DocumentRow) {
  return {
    id: d.id,
    object: 'knowledge_base.document' as const,
    knowledge_base_id: d.kb_id,
    name: d.name,
    content_type: d.content_type as 'text/plain',
    bytes: d.bytes,
    sha256: d.sha256,
    status: d.status,
    phase: d.phase,
    chunk_count: d.chunk_count,
    embedded_count: d.embedded_count,
    progress:
      d.status === 'ready' ? 1 : d.chunk_count > 0 ? Math.floor((d.embedded_count / d.chunk_count) * 1000) / 1000 : 0,
    text_chars: d.text_chars,
    token_count: d.token_count,
    pages: d.pages,
    error: d.error,
    created_at: iso(d.created_at),
    updated_at: iso(d.updated_at),
    completed_at: d.completed_at ? iso(d.completed_at) : null,
  };
}

export async function createKnowledgeBase(
  ctx: ServiceContext,
  principal: Principal,
  body: Static<typeof CreateKnowledgeBaseRequest>,
) {
  const model = body.embedding_model ?? DEFAULT_EMBEDDING_MODEL;
  if (findModel(model)?.type !== 'embeddings')
    throw new ApiError('invalid_request', `${model} is not an embeddings model`, [
      { path: '/embedding_model', message: 'must be a catalogue embeddings model' },
    ]);
  const size = body.chunk_size ?? DEFAULT_CHUNK_SIZE;
  const overlap = body.chunk_overlap ?? Math.min(DEFAULT_CHUNK_OVERLAP, Math.floor(size / 2));
  if (overlap > Math.floor(size / 2)) {
    throw new ApiError(
      'invalid_request',
      `chunk_overlap must be at most half of chunk_size (${Math.floor(size / 2)})`,
      [{ path: '/chunk_overlap', message: `must be <= ${Math.floor(size / 2)}` }],
    );
  }
  const kb = await store.insertKnowledgeBase(ctx.db, {
    id: newId('kb'),
    org_id: principal.orgId,
    name: body.name.trim() || body.name,
    description: body.description ?? null,
    embedding_model: model,
    chunk_size: size,
    chunk_overlap: overlap,
    created_by: principal.buyerId,
  });
  return knowledgeBaseView(ctx, kb);
}

export async function listKnowledgeBases(
  ctx: ServiceContext,
  principal: Principal,
  page: { limit?: number | undefined; offset?: number | undefined },
) {
  const limit = page.limit ?? 50;
  const offset = page.offset ?? 0;
  const { rows, total } = await store.listKnowledgeBases(ctx.db, principal.orgId, { limit, offset });
  return { knowledge_bases: rows.map((kb) => knowledgeBaseView(ctx, kb)), total, limit, offset };
}

export async function getKnowledgeBase(ctx: ServiceContext, principal: Principal, id: string) {
  return knowledgeBaseView(ctx, await knowledgeBaseOf(ctx.db, principal, id));
}

/** Deletes a knowledge base, its documents, chunks and uploaded bytes. Retrieval records stay. */
export async function deleteKnowledgeBase(ctx: ServiceContext, principal: Principal, id: string) {
  const docs = await store.deleteKnowledgeBase(ctx.db, principal.orgId, id);
  if (!docs) throw new ApiError('not_found', `knowledge base ${id} not found`);
  for (const doc of docs) await ctx.blobs.delete(sourceKey(doc));
  return { id, deleted: true as const };
}

/** An upload as it arrived: JSON text or a multipart file. */
export interface Upload {
  name: string;
  bytes: Buffer;
  /** The declared media type (JSON `content_type` or the multipart part's type). */
  declared?: string | undefined;
}

/**
 * Accepts a document: checks its size and format (415 for anything that is not plain text,
 * Markdown, HTML or PDF), stores its bytes and queues it. Ingestion goes on in the background:
 * the answer (202) is the document with `status: processing`.
 */
export async function uploadDocument(ctx: ServiceContext, principal: Principal, kbId: string, upload: Upload) {
  const kb = await knowledgeBaseOf(ctx.db, principal, kbId);
  const max = ctx.config.knowledge.maxDocumentBytes;
  if (upload.bytes.length > max)
    throw new ApiError('payload_too_large', `the document is ${upload.bytes.length} bytes; the most is ${max}`);
  if (upload.bytes.length === 0)
    throw new ApiError('invalid_request', 'the document is empty', [{ path: '/file', message: 'is empty' }]);
  const format = detectFormat(upload.bytes, { name: upload.name, declared: upload.declared });
  const id = newId('doc');
  await ctx.blobs.put(sourceKey(id), upload.bytes, format);
  const doc = await store.insertDocument(ctx.db, {
    id,
    kb_id: kb.id,
    org_id: principal.orgId,
    name: upload.name,
    content_type: format,
    bytes: upload.bytes.length,
    sha256: createHash('sha256').update(upload.bytes).digest('hex'),
    chunk_size: kb.chunk_size,
    chunk_overlap: kb.chunk_overlap,
    created_by: principal.buyerId,
  });
  return documentView(doc);
}

export async function listDocuments(
  ctx: ServiceContext,
  principal: Principal,
  kbId: string,
  q: { limit?: number | undefined; offset?: number | undefined; status?: store.DocumentStatus | undefined },
) {
  const kb = await knowledgeBaseOf(ctx.db, principal, kbId);
  const limit = q.limit ?? 50;
  const offset = q.offset ?? 0;
  const { rows, total } = await store.listDocuments(ctx.db, kb.id, { limit, offset, status: q.status });
  return { documents: rows.map(documentView), total, limit, offset };
}

export async function getDocument(ctx: ServiceContext, principal: Principal, kbId: string, documentId: string) {
  const doc = await store.findDocument(ctx.db, principal.orgId, kbId, documentId);
  if (!doc) throw new ApiError('not_found', `document ${documentId} not found in knowledge base ${kbId}`);
  return documentView(doc);
}

/** Deletes a document with its chunks and bytes; an ingestion in progress stops at its next step. */
export async function deleteDocument(ctx: ServiceContext, principal: Principal, kbId: string, documentId: string) {
  if (!(await store.deleteDocument(ctx.db, principal.orgId, kbId, documentId)))
    throw new ApiError('not_found', `document ${documentId} not found in knowledge base ${kbId}`);
  await ctx.blobs.delete(sourceKey(documentId));
  return { id: documentId, deleted: true as const };
}

export async function search(
  ctx: ServiceContext,
  principal: Principal,
  kbId: string,
  body: Static<typeof SearchRequest>,
) {
  const kb = await knowledgeBaseOf(ctx.db, principal, kbId);
  const { hits, queryRequestId } = await searchKnowledgeBase(ctx, principal, kb, {
    query: body.query,
    topK: body.top_k ?? DEFAULT_SEARCH_TOP_K,
    purpose: 'knowledge_base_search',
  });
  return {
    object: 'list' as const,
    knowledge_base_id: kb.id,
    model: kb.embedding_model,
    search: ctx.vectorSearch.mode,
    query_request_id: queryRequestId,
    results: hits.map((h) => ({
      document_id: h.document_id,
      document_name: h.document_name,
      chunk_id: h.chunk_id,
      chunk_index: h.chunk_index,
      score: h.score,
      sha256: h.sha256,
      text: h.text,
    })),
  };
}

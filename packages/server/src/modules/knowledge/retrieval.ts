import type { ServiceContext } from '../../service-context.js';
import type { Queryable } from '../../platform/db/index.js';
import { ApiError } from '../../platform/errors.js';
import type { Principal } from '../../platform/principal.js';
import { scopesGrant } from '../../platform/scopes.js';
import type { EvidenceEvent } from '../evidence/recorder.js';
import { withSystemContext, type ChatCall } from '../gateway/chat.js';
import type { RouteAsk } from '../gateway/routing.js';
import { embedTexts } from './embed.js';
import { findKnowledgeBase, insertRetrievals, retrievalRows, type KnowledgeBaseRow } from './store.js';
import { searchChunks, type ChunkHit } from './vector-search.js';

/** Chunks a grounded chat sends to the model unless `knowledge_base_top_k` says otherwise. */
export const DEFAULT_CHAT_TOP_K = 4;

/** A knowledge base of the caller's organization, or 404 (another organization's too). */
export async function knowledgeBaseOf(db: Queryable, principal: Principal, id: string): Promise<KnowledgeBaseRow> {
  const kb = await findKnowledgeBase(db, principal.orgId, id);
  if (!kb) throw new ApiError('not_found', `knowledge base ${id} not found`);
  return kb;
}

/**
 * Searches a knowledge base: the query is embedded on a node (a billed, receipted embeddings
 * request, `query_request_id`) with the knowledge base's model, then the nearest chunks are read
 * from the store, best first.
 */
export async function searchKnowledgeBase(
  ctx: ServiceContext,
  principal: Principal,
  kb: KnowledgeBaseRow,
  ask: {
    query: string;
    topK: number;
    route?: Pick<RouteAsk, 'jurisdiction' | 'strict_jurisdiction' | 'requires_tee'>;
    purpose: string;
    forRequest?: string;
  },
): Promise<{ hits: ChunkHit[]; queryRequestId: string }> {
  const audit = {
    purpose: ask.purpose,
    knowledge_base_id: kb.id,
    ...(ask.forRequest ? { for_request_id: ask.forRequest } : {}),
  };
  const { vectors, requestId } = await embedTexts(ctx, principal, {
    model: kb.embedding_model,
    texts: [ask.query],
    audit,
    ...(ask.route ? { route: ask.route } : {}),
  });
  const hits = await searchChunks(ctx.db, ctx.vectorSearch, {
    kbId: kb.id,
    model: kb.embedding_model,
    query: vectors[0] ?? [],
    topK: ask.topK,
  });
  return { hits, queryRequestId: requestId };
}

/** The instruction and numbered sources placed before a grounded conversation. */
export function sourcesMessage(kbName: string, hits: readonly ChunkHit[]): string {
  if (hits.length === 0) {
    return `The knowledge base "${kbName}" has no passage related to this question. Say that the knowledge base does not cover it, then answer only if you are sure.`;
  }
  const blocks = hits.map((h, i) => `[${i + 1}] ${h.document_name} (chunk ${h.chunk_index})\n${h.text}`);
  return [
    `Answer the user's question from the numbered sources below, taken from the knowledge base "${kbName}".`,
    'Cite the sources you use in square brackets, like [1] or [2][3]. If the sources do not contain the answer, say so rather than guessing.',
    '',
    blocks.join('\n\n'),
  ].join('\n');
}

/**
 * The evidence event of a grounded request: every chunk the model was given (document, chunk,
 * SHA-256 of its text, score, rank), hashed into the request's evidence run like any event.
 */
export function retrievedEvent(
  kbName: string,
  retrieval: {
    knowledge_base_id: string;
    embedding_model: string;
    query_request_id: string | null;
    chunks: { rank: number; document_id: string; chunk_id: string; sha256: string; score: number }[];
  },
): EvidenceEvent {
  const best = retrieval.chunks[0];
  return {
    type: 'knowledge.retrieved',
    summary:
      `${retrieval.chunks.length} chunks retrieved from knowledge base ${retrieval.knowledge_base_id} (${kbName})${best ? `, best ${best.chunk_id} at ${best.score.toFixed(4)}` : ''}`.slice(
        0,
        500,
      ),
    metadata: retrieval,
    causedBy: ['request.received'],
  };
}

/**
 * Grounds a chat call in its `knowledge_base` (api-spec part 4): checks that the caller may read
 * knowledge bases (403 `insufficient_scope` for a write-only key) and owns this one (404), embeds
 * the last user message, puts the nearest chunks before the conversation with citation numbers,
 * returns them in the answer's `sources`, and records each retrieved chunk (document, chunk,
 * SHA-256 of its text, score, rank) in the request's receipt metadata and in `kb_retrievals`,
 * written in the same transaction as the request itself.
 *
 * @example
 * const grounded = await groundChat(ctx, principal, prepareChat(body));
 * await runRequest(ctx, principal, grounded);
 */
export async function groundChat(ctx: ServiceContext, principal: Principal, call: ChatCall): Promise<ChatCall> {
  const ask = call.knowledgeBase;
  if (!ask) return call;
  if (!scopesGrant(principal.scopes, 'knowledge_bases:read')) {
    throw new ApiError(
      'insufficient_scope',
      `knowledge_base needs knowledge_bases:read, which this credential's scopes (${principal.scopes.join(', ')}) do not grant`,
    );
  }
  const kb = await knowledgeBaseOf(ctx.db, principal, ask.id);
  const messages = call.payload.messages as { role: string; content: string }[];
  const question =
    [...messages].reverse().find((m) => m.role === 'user')?.content ?? messages[messages.length - 1]?.content ?? '';
  const topK = ask.topK ?? DEFAULT_CHAT_TOP_K;
  const { hits, queryRequestId } =
    question.trim() === ''
      ? { hits: [], queryRequestId: null }
      : await searchKnowledgeBase(ctx, principal, kb, {
          query: question,
          topK,
          route: call.route,
          purpose: 'knowledge_base_query',
          forRequest: call.id,
        });
  const sources = hits.map((h, i) => ({
    index: i + 1,
    document_id: h.document_id,
    document_name: h.document_name,
    chunk_id: h.chunk_id,
    chunk_index: h.chunk_index,
    score: h.score,
    sha256: h.sha256,
    text: h.text,
  }));
  const chunks = hits.map((h, i) => ({
    rank: i + 1,
    document_id: h.document_id,
    chunk_id: h.chunk_id,
    sha256: h.sha256,
    score: h.score,
  }));
  const grounded = withSystemContext(call, sourcesMessage(kb.name, hits), { sources });
  const retrieval = {
    knowledge_base_id: kb.id,
    embedding_model: kb.embedding_model,
    query_request_id: queryRequestId,
    chunks,
  };
  return {
    ...grounded,
    audit: { ...call.audit, retrieval },
    evidence: [...(call.evidence ?? []), retrievedEvent(kb.name, retrieval)],
    onOpen: async (tx) => {
      await call.onOpen?.(tx);
      await insertRetrievals(
        tx,
        chunks.map((c) => ({
          request_id: call.id,
          rank: c.rank,
          org_id: principal.orgId,
          kb_id: kb.id,
          document_id: c.document_id,
          chunk_id: c.chunk_id,
          chunk_sha256: c.sha256,
          score: c.score,
          query_request_id: queryRequestId,
        })),
      );
    },
  };
}

/** One retrieved chunk of a request, as evidence records it. */
export interface Retrieval {
  rank: number;
  knowledge_base_id: string;
  document_id: string;
  chunk_id: string;
  /** SHA-256 (hex) of the chunk text the model was given. */
  chunk_sha256: string;
  /** Cosine similarity to the question. */
  score: number;
  /** The embeddings request (with its own receipt) that embedded the question. */
  query_request_id: string | null;
  created_at: string;
}

/**
 * The retrieval provenance of a gateway request (`chatcmpl-...`), best first; empty when it was
 * not grounded. For the evidence run of the request: one event per request or per chunk.
 *
 * @example
 * const chunks = await retrievalsFor(ctx.db, 'chatcmpl-01jd...');
 * chunks[0]; // { rank: 1, document_id: 'doc_...', chunk_id: 'chk_...', chunk_sha256: '...', score: 0.83, ... }
 */
export async function retrievalsFor(db: Queryable, requestId: string): Promise<Retrieval[]> {
  const rows = await retrievalRows(db, requestId);
  return rows.map((r) => ({
    rank: r.rank,
    knowledge_base_id: r.kb_id,
    document_id: r.document_id,
    chunk_id: r.chunk_id,
    chunk_sha256: r.chunk_sha256,
    score: r.score,
    query_request_id: r.query_request_id,
    created_at: new Date(r.created_at).toISOString(),
  }));
}

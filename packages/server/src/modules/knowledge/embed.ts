import type { ServiceContext } from '../../service-context.js';
import type { Principal } from '../../platform/principal.js';
import { embeddingsView, prepareEmbeddings } from '../gateway/embeddings.js';
import type { RouteAsk } from '../gateway/routing.js';
import { runRequest } from '../gateway/service.js';
import { unitVector } from './vector-search.js';

/** Who pays for ingestion done in the background: the organization, on behalf of the uploader. */
export function principalFor(orgId: string, buyerId: string): Principal {
  return { kind: 'key', orgId, buyerId, role: 'member', scopes: [] };
}

/**
 * Embeds texts on the network's own embedding nodes: one gateway embeddings request (`emb-...`),
 * routed, held, settled and receipted (SVC1, signed by the node) exactly like `POST /v1/embeddings`,
 * with `audit` in the receipt metadata. Returns unit vectors in input order and the request id,
 * whose receipt is at `GET /api/v1/job/receipts/{request_id}`.
 *
 * @example
 * const { vectors, requestId } = await embedTexts(ctx, principal, { model: 'all-MiniLM-L6-v2', texts: ['a', 'b'], audit: {} });
 */
export async function embedTexts(
  ctx: ServiceContext,
  principal: Principal,
  ask: {
    model: string;
    texts: string[];
    audit: Record<string, unknown>;
    route?: Pick<RouteAsk, 'jurisdiction' | 'strict_jurisdiction' | 'requires_tee'>;
    signal?: AbortSignal;
  },
): Promise<{ vectors: number[][]; requestId: string; receiptId: string }> {
  const call = { ...prepareEmbeddings({ model: ask.model, input: ask.texts, ...ask.route }), audit: ask.audit };
  const done = await runRequest(ctx, principal, call, ask.signal ? { signal: ask.signal } : {});
  const view = embeddingsView(call, done);
  const vectors = view.data.map((d) => unitVector(Array.isArray(d.embedding) ? d.embedding : []));
  return { vectors, requestId: call.id, receiptId: done.receiptId };
}

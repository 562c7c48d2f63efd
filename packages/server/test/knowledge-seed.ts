import { createHash } from 'node:crypto';
import { hashedEmbedding } from '@svc/node-agent/testing';
import type { Db } from '../src/platform/db/index.js';
import { newId } from '../src/platform/ids.js';
import { insertDocument, insertKnowledgeBase, replaceChunks, storeEmbeddings } from '../src/modules/knowledge/store.js';
import { unitVector, type VectorSearch } from '../src/modules/knowledge/vector-search.js';

/**
 * Fills a knowledge base straight through the store, with the test upstream's hashed
 * bag-of-words embeddings (what a node with the OpenAI test server would return): for store-level
 * tests and the retrieval bench, where going through nodes would only measure the nodes.
 *
 * @example
 * const { kbId } = await seedKnowledgeBase(ctx.db, ctx.vectorSearch, { orgId, buyerId, chunks: 1000, text: (i) => `chunk ${i}` });
 */
export async function seedKnowledgeBase(
  db: Db,
  search: Pick<VectorSearch, 'column'>,
  o: {
    orgId: string;
    buyerId: string;
    chunks: number;
    text: (i: number) => string;
    kbId?: string;
    perDocument?: number;
    onProgress?: (done: number) => void;
  },
): Promise<{ kbId: string; documentIds: string[] }> {
  const model = 'all-MiniLM-L6-v2';
  const kbId =
    o.kbId ??
    (
      await insertKnowledgeBase(db, {
        id: newId('kb'),
        org_id: o.orgId,
        name: 'seeded',
        description: null,
        embedding_model: model,
        chunk_size: 200,
        chunk_overlap: 40,
        created_by: o.buyerId,
      })
    ).id;
  const perDocument = o.perDocument ?? 1000;
  const documentIds: string[] = [];
  for (let first = 0; first < o.chunks; first += perDocument) {
    const count = Math.min(perDocument, o.chunks - first);
    const doc = await insertDocument(db, {
      id: newId('doc'),
      kb_id: kbId,
      org_id: o.orgId,
      name: `seeded-${first / perDocument}.txt`,
      content_type: 'text/plain',
      bytes: 0,
      sha256: '0'.repeat(64),
      chunk_size: 200,
      chunk_overlap: 40,
      created_by: o.buyerId,
    });
    documentIds.push(doc.id);
    const chunks = Array.from({ length: count }, (_, j) => {
      const text = o.text(first + j);
      return {
        id: newId('chk'),
        ordinal: j,
        text,
        sha256: createHash('sha256').update(text).digest('hex'),
        tokens: 1,
        char_start: 0,
        char_end: text.length,
      };
    });
    await db.transaction(async (tx) => {
      await replaceChunks(tx, doc, model, chunks);
      for (let k = 0; k < chunks.length; k += 250) {
        const batch = chunks
          .slice(k, k + 250)
          .map((c) => ({ id: c.id, embedding: unitVector(hashedEmbedding(c.text, 384)) }));
        await storeEmbeddings(tx, search, doc.id, 'emb-seeded', batch);
      }
      await tx.query(
        "UPDATE kb_documents SET status = 'ready', phase = 'done', chunk_count = $2, completed_at = now() WHERE id = $1",
        [doc.id, count],
      );
    });
    o.onProgress?.(first + count);
  }
  return { kbId, documentIds };
}

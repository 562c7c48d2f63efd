import { hashedEmbedding } from '@svc/node-agent/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTestApp,
  createTestStore,
  signUp,
  TEST_STORE_KIND,
  type TestApp,
  type TestBuyer,
} from '../../../test/harness.js';
import { seedKnowledgeBase } from '../../../test/knowledge-seed.js';
import { storeEmbeddings } from './store.js';
import { searchChunks, unitVector, vectorParam } from './vector-search.js';

const TOPICS = [
  'volcano lava magma eruption crater',
  'sourdough flour yeast starter oven',
  'tide moon ocean gravity coast',
  'glacier ice snow valley cold',
  'orbit rocket launch fuel stage',
];
const textOf = (i: number) => `${TOPICS[i % TOPICS.length]} note ${i} ${i % 7 === 0 ? 'extra detail' : ''}`;
const query = (text: string) => unitVector(hashedEmbedding(text, 384));

async function pgvectorAvailable(t: TestApp): Promise<boolean> {
  return (await t.ctx.db.query("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")).rows.length > 0;
}

describe('vector search: pgvector with HNSW where available, exact SQL elsewhere, the same answers', () => {
  let auto: TestApp;
  let exact: TestApp;
  let buyerA: TestBuyer;
  let buyerE: TestBuyer;
  let kbA: string;
  let kbE: string;
  beforeAll(async () => {
    auto = await createTestApp();
    exact = await createTestApp({ env: { SVC_KB_VECTOR_SEARCH: 'exact' } });
    buyerA = await signUp(auto.app);
    buyerE = await signUp(exact.app);
    kbA = (
      await seedKnowledgeBase(auto.ctx.db, auto.ctx.vectorSearch, {
        orgId: buyerA.orgId,
        buyerId: buyerA.buyerId,
        chunks: 600,
        text: textOf,
        perDocument: 200,
      })
    ).kbId;
    kbE = (
      await seedKnowledgeBase(exact.ctx.db, exact.ctx.vectorSearch, {
        orgId: buyerE.orgId,
        buyerId: buyerE.buyerId,
        chunks: 600,
        text: textOf,
        perDocument: 200,
      })
    ).kbId;
  });
  afterAll(async () => {
    await auto.close();
    await exact.close();
  });

  it('uses pgvector wherever the extension exists (always on PGlite), else falls back to exact with a warning at start', async () => {
    if (await pgvectorAvailable(auto)) {
      expect(auto.ctx.vectorSearch).toMatchObject({ mode: 'hnsw', column: 'vector' });
      const { rows } = await auto.ctx.db.query<{ indexname: string }>(
        "SELECT indexname FROM pg_indexes WHERE tablename = 'kb_chunks' AND indexdef LIKE '%hnsw%' ORDER BY 1",
      );
      expect(rows.map((r) => r.indexname)).toEqual([
        'kb_chunks_hnsw_all_minilm_l6_v2',
        'kb_chunks_hnsw_nomic_embed_text',
      ]);
    } else {
      // Debian's PostgreSQL has no pgvector: this is the path CI's PostgreSQL pass takes.
      expect(TEST_STORE_KIND).toBe('postgres');
      expect(auto.ctx.vectorSearch).toMatchObject({
        mode: 'exact',
        column: 'array',
        pgvector: null,
        reason: 'the pgvector extension is not installed on this PostgreSQL server',
      });
      expect(auto.logs.text()).toContain(
        'knowledge-base search is exact, not indexed: the pgvector extension is not installed on this PostgreSQL server',
      );
    }
    expect(exact.ctx.vectorSearch).toMatchObject({ mode: 'exact', column: 'array' });
    expect(exact.logs.text()).toContain('knowledge-base search is exact');
  });

  it('ranks the nearest chunks first, with cosine scores, and both modes agree', async () => {
    // Chunk 35's own text: it alone scores 1; many others tie just below it.
    const q = query(textOf(35));
    const a = await searchChunks(auto.ctx.db, auto.ctx.vectorSearch, {
      kbId: kbA,
      model: 'all-MiniLM-L6-v2',
      query: q,
      topK: 10,
    });
    const e = await searchChunks(exact.ctx.db, exact.ctx.vectorSearch, {
      kbId: kbE,
      model: 'all-MiniLM-L6-v2',
      query: q,
      topK: 10,
    });
    for (const hits of [a, e]) {
      expect(hits).toHaveLength(10);
      expect(hits[0]?.text).toBe(textOf(35));
      expect(hits[0]?.score).toBeCloseTo(1, 5);
      for (const h of hits) expect(h.text).toContain('volcano');
      const scores = hits.map((h) => h.score);
      expect([...scores].sort((x, y) => y - x)).toEqual(scores);
      // Unit vectors: the score is their dot product.
      const second = query(hits[1]?.text ?? '');
      expect(hits[1]?.score).toBeCloseTo(
        q.reduce((sum, x, i) => sum + x * (second[i] ?? 0), 0),
        5,
      );
    }
    expect(a.map((h) => h.score.toFixed(5))).toEqual(e.map((h) => h.score.toFixed(5)));
  });

  it('stores vectors sent as binary parameters exactly (float4), in both column types, non-finite values as 0', async () => {
    // The binary forms themselves: pgvector's (int16 dimensions, int16 0, float4s) and real[]'s.
    expect([...vectorParam({ column: 'vector' }, [1, -0.5])]).toEqual([0, 2, 0, 0, 63, 128, 0, 0, 191, 0, 0, 0]);
    const array = vectorParam({ column: 'array' }, [0.25]);
    expect([array.readInt32BE(0), array.readInt32BE(8), array.readInt32BE(12), array.readInt32BE(20)]).toEqual([
      1, 700, 1, 4,
    ]);
    expect(array.readFloatBE(24)).toBe(0.25);
    const v = Array.from({ length: 384 }, (_, i) => Math.sin(i + 1) / 10);
    v[3] = Number.NaN;
    v[4] = Number.POSITIVE_INFINITY;
    for (const [t, buyer] of [
      [auto, buyerA],
      [exact, buyerE],
    ] as const) {
      const { kbId } = await seedKnowledgeBase(t.ctx.db, t.ctx.vectorSearch, {
        orgId: buyer.orgId,
        buyerId: buyer.buyerId,
        chunks: 1,
        text: () => 'one chunk',
      });
      const { rows } = await t.ctx.db.query<{ id: string; document_id: string }>(
        'SELECT id, document_id FROM kb_chunks WHERE kb_id = $1',
        [kbId],
      );
      const chunk = rows[0];
      if (!chunk) throw new Error('no chunk seeded');
      await storeEmbeddings(t.ctx.db, t.ctx.vectorSearch, chunk.document_id, 'emb-binary', [
        { id: chunk.id, embedding: v },
      ]);
      const stored = await t.ctx.db.query<{ e: number[]; by: string }>(
        'SELECT embedding::real[] AS e, embedded_by AS by FROM kb_chunks WHERE id = $1',
        [chunk.id],
      );
      expect(stored.rows[0]?.by).toBe('emb-binary');
      // float4 prints its shortest form: read back as float4, each value is the one sent.
      expect(stored.rows[0]?.e.map((x) => Math.fround(Number(x)))).toEqual(
        v.map((x) => (Number.isFinite(x) ? Math.fround(x) : 0)),
      );
    }
  });

  it("returns only the knowledge base's own chunks, top_k of them even when another knowledge base holds nearer ones", async () => {
    const small = await seedKnowledgeBase(auto.ctx.db, auto.ctx.vectorSearch, {
      orgId: buyerA.orgId,
      buyerId: buyerA.buyerId,
      chunks: 12,
      text: (i) => `rocket launch ${i}`,
    });
    const hits = await searchChunks(auto.ctx.db, auto.ctx.vectorSearch, {
      kbId: small.kbId,
      model: 'all-MiniLM-L6-v2',
      query: query('volcano lava magma eruption crater'),
      topK: 10,
    });
    expect(hits).toHaveLength(10);
    expect(new Set(hits.map((h) => h.document_id))).toEqual(new Set(small.documentIds));
  });

  it('can serve the search from the HNSW index: the partial-index predicate and the cast match (pgvector only)', async () => {
    if (auto.ctx.vectorSearch.mode !== 'hnsw') return;
    const literal = `[${query('tide moon').join(',')}]`;
    const plan = await auto.ctx.db.transaction(async (tx) => {
      // Which plan wins depends on the knowledge base's size (a small one is sorted exactly); this
      // checks that the index applies at all. bench/retrieval.ts shows the plan at 100,000 chunks.
      await tx.query('SET LOCAL enable_seqscan = off');
      await tx.query('SET LOCAL enable_bitmapscan = off');
      const { rows } = await tx.query<Record<string, string>>(
        `EXPLAIN SELECT c.id FROM kb_chunks c WHERE c.model = 'all-MiniLM-L6-v2' AND c.embedding IS NOT NULL
          ORDER BY c.embedding::vector(384) <=> $1::vector(384) LIMIT 5`,
        [literal],
      );
      return rows.map((r) => Object.values(r).join(' ')).join('\n');
    });
    expect(plan).toContain('Index Scan using kb_chunks_hnsw_all_minilm_l6_v2');
  });
});

describe('a store that gains pgvector later', () => {
  it('converts its exact-search column and keeps every embedding (PGlite, where pgvector is always there)', async () => {
    const store = await createTestStore();
    try {
      const first = await createTestApp({ store, env: { SVC_KB_VECTOR_SEARCH: 'exact' } });
      const buyer = await signUp(first.app);
      const { kbId } = await seedKnowledgeBase(first.ctx.db, first.ctx.vectorSearch, {
        orgId: buyer.orgId,
        buyerId: buyer.buyerId,
        chunks: 50,
        text: textOf,
      });
      const q = query(textOf(18));
      const before = await searchChunks(first.ctx.db, first.ctx.vectorSearch, {
        kbId,
        model: 'all-MiniLM-L6-v2',
        query: q,
        topK: 5,
      });
      await first.close();
      const second = await createTestApp({ store });
      try {
        if (!(await pgvectorAvailable(second))) return;
        expect(second.ctx.vectorSearch).toMatchObject({ mode: 'hnsw', column: 'vector' });
        const after = await searchChunks(second.ctx.db, second.ctx.vectorSearch, {
          kbId,
          model: 'all-MiniLM-L6-v2',
          query: q,
          topK: 5,
        });
        expect(after[0]?.chunk_id).toBe(before[0]?.chunk_id);
        expect(after.map((h) => h.score.toFixed(5))).toEqual(before.map((h) => h.score.toFixed(5)));
        const { rows } = await second.ctx.db.query<{ n: number }>(
          'SELECT count(*)::int AS n FROM kb_chunks WHERE kb_id = $1 AND embedding IS NOT NULL',
          [kbId],
        );
        expect(rows[0]?.n).toBe(50);
      } finally {
        await second.close();
      }
    } finally {
      await store.drop();
    }
  });
});

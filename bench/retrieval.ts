/**
 * Knowledge-base retrieval: how fast documents are ingested (chunks embedded per second, through
 * the real pipeline: upload, background ingestion, gateway embeddings requests on a real node
 * agent whose engine is the OpenAI test server), and how fast a knowledge base of `--chunks`
 * chunks is searched (p50/p99 of the vector query in the store, and of `POST .../search` end to
 * end, which also embeds the query on the node). See bench/README.md.
 *
 * @example
 * npx tsx bench/retrieval.ts --chunks 100000 --queries 200 --ingest-chunks 5000
 * DATABASE_URL=postgres://... npx tsx bench/retrieval.ts ...
 */
import { availableParallelism, cpus } from 'node:os';
import { parseArgs } from 'node:util';
import { hashedEmbedding } from '@svc/node-agent/testing';
import { startGatewayFixture } from '../packages/server/test/gateway-fixture.js';
import { seedKnowledgeBase } from '../packages/server/test/knowledge-seed.js';
import {
  prepareVectorSearch,
  searchChunks,
  unitVector,
} from '../packages/server/src/modules/knowledge/vector-search.js';
import { positiveInt, printTable } from './lib.js';

const { values } = parseArgs({
  options: {
    chunks: { type: 'string', default: '100000' },
    queries: { type: 'string', default: '200' },
    'http-queries': { type: 'string', default: '50' },
    'ingest-chunks': { type: 'string', default: '5000' },
    batch: { type: 'string', default: '64' },
  },
});
const chunks = positiveInt('chunks', values.chunks);
const queries = positiveInt('queries', values.queries);
const httpQueries = positiveInt('http-queries', values['http-queries']);
const ingestChunks = positiveInt('ingest-chunks', values['ingest-chunks']);
const batch = positiveInt('batch', values.batch);

/** Words for chunk texts: 2,000 made-up words, 24 to a chunk, so chunks differ but share words. */
const VOCABULARY = Array.from({ length: 2000 }, (_, i) => `w${(i * 7919).toString(36)}`);
let seed = 42;
const random = () => {
  seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
  return seed / 2 ** 31;
};
const sentence = (words: number) =>
  Array.from({ length: words }, () => VOCABULARY[Math.floor(random() * VOCABULARY.length)]).join(' ');

function quantiles(samples: number[]) {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0;
  return { p50: at(0.5), p99: at(0.99) };
}
const ms = (x: number) => x.toFixed(x < 10 ? 2 : 1);

const f = await startGatewayFixture({
  env: {
    SVC_LOG_LEVEL: 'error',
    SVC_KB_EMBED_BATCH: String(batch),
    SVC_KB_MAX_DOCUMENT_BYTES: String(64 * 1024 * 1024),
    SVC_FREE_TIER_CENTS: '100000',
  },
});
try {
  const { ctx } = f.server;
  await f.addNode({ concurrency: 4 });
  console.log(
    `node ${process.version}, ${availableParallelism()} CPUs (${cpus()[0]?.model.trim() ?? '?'}), store ${ctx.db.kind}, search ${ctx.vectorSearch.mode}${ctx.vectorSearch.pgvector ? ` (pgvector ${ctx.vectorSearch.pgvector})` : ''}`,
  );

  // 1. Ingestion through the real pipeline: one document of about --ingest-chunks chunks.
  const ingestKb = String(
    (await f.api('POST', '/api/v1/knowledge-bases', { name: 'ingest', chunk_size: 200, chunk_overlap: 40 })).json.id,
  );
  // A paragraph of 45 made-up words is about 140 tokens: a little over one paragraph per chunk.
  const paragraphs = Array.from({ length: ingestChunks }, () => `${sentence(45)}.`);
  const text = paragraphs.join('\n\n');
  const started = performance.now();
  const up = await f.api('POST', `/api/v1/knowledge-bases/${ingestKb}/documents`, { name: 'bench.txt', text });
  if (up.status !== 202) throw new Error(`upload answered ${up.status}: ${up.text}`);
  let doc: Record<string, unknown> = up.json;
  let embeddingStarted = 0;
  while (doc.status === 'processing') {
    await new Promise((r) => setTimeout(r, 100));
    doc = (await f.api('GET', `/api/v1/knowledge-bases/${ingestKb}/documents/${String(up.json.id)}`)).json;
    if (!embeddingStarted && doc.phase === 'embedding') embeddingStarted = performance.now();
  }
  if (doc.status !== 'ready') throw new Error(`ingestion failed: ${String(doc.error)}`);
  const total = (performance.now() - started) / 1000;
  const embedding = (performance.now() - (embeddingStarted || started)) / 1000;
  const n = Number(doc.chunk_count);
  console.log(
    `\ningestion: ${(Buffer.byteLength(text) / 1e6).toFixed(1)} MB, ${n} chunks of <= 200 tokens, ${batch} chunks per embeddings request`,
  );
  printTable([
    ['', 'seconds', 'chunks/s'],
    ['upload to ready', total.toFixed(1), (n / total).toFixed(0)],
    ['embedding phase', embedding.toFixed(1), (n / embedding).toFixed(0)],
  ]);

  // 2. Search over --chunks chunks, loaded straight into the store (hashed bag-of-words vectors).
  // The HNSW index is dropped for the load and built once after it: far faster than keeping it
  // up to date row by row, and the search does not care how the index was built.
  const buyer = f.buyer;
  const hnsw = ctx.vectorSearch.mode === 'hnsw';
  if (hnsw) await ctx.db.query('DROP INDEX kb_chunks_hnsw_all_minilm_l6_v2');
  const loadStarted = performance.now();
  let shown = 0;
  const { kbId } = await seedKnowledgeBase(ctx.db, ctx.vectorSearch, {
    orgId: buyer.orgId,
    buyerId: buyer.buyerId,
    chunks,
    perDocument: 2000,
    text: () => sentence(24),
    onProgress: (done) => {
      if (done - shown >= chunks / 10) {
        shown = done;
        process.stderr.write(`  loaded ${done} chunks (${((performance.now() - loadStarted) / 1000).toFixed(0)} s)\n`);
      }
    },
  });
  const loadSeconds = (performance.now() - loadStarted) / 1000;
  let buildSeconds = 0;
  if (hnsw) {
    const buildStarted = performance.now();
    if (ctx.db.kind === 'pglite') await ctx.db.query("SET maintenance_work_mem = '1GB'");
    await prepareVectorSearch(ctx.db, 'auto');
    buildSeconds = (performance.now() - buildStarted) / 1000;
  }
  await ctx.db.query('ANALYZE kb_chunks');
  const probe = unitVector(hashedEmbedding(sentence(8), 384));
  const plan =
    ctx.vectorSearch.mode === 'hnsw'
      ? await ctx.db.transaction(async (tx) => {
          await tx.query('SET LOCAL hnsw.iterative_scan = relaxed_order');
          const { rows } = await tx.query<Record<string, string>>(
            `EXPLAIN SELECT c.id FROM kb_chunks c WHERE c.model = 'all-MiniLM-L6-v2' AND c.kb_id = $2 AND c.embedding IS NOT NULL ORDER BY c.embedding::vector(384) <=> $1::vector(384) LIMIT 5`,
            [`[${probe.join(',')}]`, kbId],
          );
          return (
            rows
              .map((r) => Object.values(r).join(' '))
              .find((line) => /Scan/.test(line))
              ?.trim()
              .replace(/\s+\(cost.*$/, '') ?? '?'
          );
        })
      : 'exact: kb_dot over every chunk of the knowledge base';

  const storeTimes: number[] = [];
  for (let i = 0; i < queries + 10; i++) {
    const q = unitVector(hashedEmbedding(sentence(8), 384));
    const t0 = performance.now();
    const hits = await searchChunks(ctx.db, ctx.vectorSearch, { kbId, model: 'all-MiniLM-L6-v2', query: q, topK: 5 });
    if (hits.length !== 5) throw new Error(`search returned ${hits.length} hits`);
    if (i >= 10) storeTimes.push(performance.now() - t0);
  }
  const s = quantiles(storeTimes);
  const built = hnsw ? `, HNSW index built in ${buildSeconds.toFixed(0)} s` : '';
  console.log(
    `\nsearch: ${chunks} chunks in one knowledge base (stored in ${loadSeconds.toFixed(0)} s${built}), top_k 5`,
  );
  console.log(`plan: ${plan}`);
  const header = ['', 'queries', 'p50 ms', 'p99 ms'];
  printTable([header, ['vector query (store)', String(queries), ms(s.p50), ms(s.p99)]]);

  // The client's pooled connection may have been closed by the server while the load ran, and
  // the node may have missed heartbeats while the embedded store was busy: wait until it is live.
  await f.api('GET', '/api/v1/health').catch(() => undefined);
  for (let i = 0; i < 60; i++) {
    const warm = await f
      .api('POST', `/api/v1/knowledge-bases/${kbId}/search`, { query: 'warm up', top_k: 1 })
      .catch(() => undefined);
    if (warm?.status === 200) break;
    await new Promise((r) => setTimeout(r, 1000));
  }
  const httpTimes: number[] = [];
  for (let i = 0; i < httpQueries + 3; i++) {
    const t0 = performance.now();
    const res = await f.api('POST', `/api/v1/knowledge-bases/${kbId}/search`, { query: sentence(8), top_k: 5 });
    if (res.status !== 200) throw new Error(`search answered ${res.status}: ${res.text}`);
    if (i >= 3) httpTimes.push(performance.now() - t0);
  }
  const h = quantiles(httpTimes);
  printTable([
    header,
    ['POST .../search (HTTP, query embedded on the node)', String(httpQueries), ms(h.p50), ms(h.p99)],
  ]);
} finally {
  await f.close();
}

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestStore, type TestStore } from '../../../test/harness.js';
import { openDb } from '../../platform/db/index.js';
import { eventually, startGatewayFixture, type GatewayFixture } from '../../../test/gateway-fixture.js';
import { prose } from '../../../test/documents.js';
import { MAX_ATTEMPTS, startIngestor, type Ingestor } from './ingest.js';

type Doc = {
  id: string;
  status: string;
  phase: string;
  chunk_count: number;
  embedded_count: number;
  progress: number;
  error: string | null;
  token_count: number | null;
};

describe('ingestion of a 5 MB document, with progress visible while it runs', () => {
  let f: GatewayFixture;
  beforeAll(async () => {
    // Exact search on every store, as the PostgreSQL pass (no pgvector there) already runs it: on
    // PGlite the HNSW index's upkeep for 6,490 vectors was most of this file's CPU, and the index
    // is vector-search.test.ts's subject (bench/README.md, "Knowledge ingestion").
    f = await startGatewayFixture({
      env: {
        SVC_KB_EMBED_BATCH: '256',
        SVC_KB_MAX_DOCUMENT_BYTES: String(8 * 1024 * 1024),
        SVC_KB_VECTOR_SEARCH: 'exact',
      },
    });
    await f.addNode({ concurrency: 4 });
  });
  afterAll(() => f.close());

  it('answers 202 at once, then shows the phase and the chunk counts rising until every chunk is embedded', async () => {
    const kb = await f.api('POST', '/api/v1/knowledge-bases', { name: 'big' });
    const kbId = String(kb.json.id);
    const text = prose(5 * 1024 * 1024);
    const form = new FormData();
    form.append('file', new Blob([text], { type: 'text/plain' }), 'big.txt');
    const started = Date.now();
    const res = await fetch(`${f.server.url}/api/v1/knowledge-bases/${kbId}/documents`, {
      method: 'POST',
      headers: { authorization: `Bearer ${f.buyer.apiKey}` },
      body: form,
    });
    expect(res.status).toBe(202);
    const accepted = (await res.json()) as Doc;
    expect(accepted).toMatchObject({ status: 'processing', chunk_count: 0, embedded_count: 0 });
    expect(Date.now() - started).toBeLessThan(15_000);

    const seen: Doc[] = [];
    // Every 200 ms, not eventually's 20: ingestion takes seconds (25 batches), and each look is
    // an HTTP request the test process pays for.
    let done: Doc | undefined;
    for (const deadline = Date.now() + 170_000; !done; await new Promise((r) => setTimeout(r, 200))) {
      if (Date.now() > deadline) throw new Error('the document was not ready in time');
      const doc = (await f.api('GET', `/api/v1/knowledge-bases/${kbId}/documents/${accepted.id}`))
        .json as unknown as Doc;
      seen.push(doc);
      if (doc.status === 'failed') throw new Error(`failed: ${doc.error}`);
      if (doc.status === 'ready') done = doc;
    }
    expect(done.chunk_count).toBeGreaterThan(4000);
    expect(done).toMatchObject({ embedded_count: done.chunk_count, progress: 1, phase: 'done' });
    expect(done.token_count).toBeGreaterThan(1_000_000);
    // Progress was visible: part-way states with a known chunk count, never going backwards.
    const partial = seen.filter(
      (d) =>
        d.phase === 'embedding' &&
        d.chunk_count === done.chunk_count &&
        d.embedded_count > 0 &&
        d.embedded_count < d.chunk_count,
    );
    expect(partial.length).toBeGreaterThan(0);
    const counts = seen.map((d) => d.embedded_count);
    expect(counts).toEqual([...counts].sort((a, b) => a - b));
    const { rows } = await f.server.ctx.db.query<{ max: number; requests: number }>(
      'SELECT max(tokens)::int AS max, count(DISTINCT embedded_by)::int AS requests FROM kb_chunks WHERE document_id = $1',
      [accepted.id],
    );
    expect(rows[0]?.max).toBeLessThanOrEqual(200);
    expect(rows[0]?.requests).toBe(Math.ceil(done.chunk_count / 256));
  }, 180_000);
});

describe('ingestion survives its instance stopping: another instance takes the document over', () => {
  let store: TestStore;
  const env = {
    SVC_KB_LEASE_SECONDS: '2',
    SVC_KB_EMBED_BATCH: '4',
    SVC_KB_EMBED_CONCURRENCY: '1',
    SVC_SHUTDOWN_GRACE_MS: '500',
  };
  beforeAll(async () => {
    store = await createTestStore();
  });
  afterAll(() => store.drop());

  it('resumes after the lease runs out, keeping what was embedded, and fails a document interrupted too often', async () => {
    const a = await startGatewayFixture({ env, store });
    await a.addNode({ upstream: { delayMs: 100 } });
    const kbId = String(
      (await a.api('POST', '/api/v1/knowledge-bases', { name: 'kb', chunk_size: 32, chunk_overlap: 0 })).json.id,
    );
    const up = await a.api('POST', `/api/v1/knowledge-bases/${kbId}/documents`, {
      name: 'notes.txt',
      text: prose(6000),
    });
    const docId = String(up.json.id);
    const path = `/api/v1/knowledge-bases/${kbId}/documents/${docId}`;
    await eventually(async () => ((await a.api('GET', path)).json.embedded_count as number) >= 8, 30_000);
    // A crash: the instance stops where it is and never gives its lease back.
    a.server.app.knowledgeIngestor.halt();
    const before = await a.server.ctx.db.query<{ id: string; embedded_by: string }>(
      'SELECT id, embedded_by FROM kb_chunks WHERE document_id = $1 AND embedding IS NOT NULL',
      [docId],
    );
    const stopped = (await a.api('GET', path)).json as unknown as Doc;
    expect(stopped.status).toBe('processing');
    expect(stopped.embedded_count).toBeLessThan(stopped.chunk_count);
    const buyerKey = a.buyer.apiKey;
    await a.close();
    // Its node went down with it; without this it would look live for 30 s more and draw work.
    const db = await openDb(store);
    await db.query("UPDATE nodes SET last_seen = now() - interval '1 hour'");
    await db.close();

    const b = await startGatewayFixture({ env, store });
    try {
      await b.addNode();
      const doc = await eventually(async () => {
        const d = (await b.api('GET', path, undefined, buyerKey)).json as unknown as Doc;
        return d.status === 'ready' ? d : undefined;
      }, 60_000);
      expect(doc.embedded_count).toBe(doc.chunk_count);
      const after = await b.server.ctx.db.query<{ id: string; embedded_by: string; attempts: number }>(
        'SELECT c.id, c.embedded_by, d.attempts FROM kb_chunks c JOIN kb_documents d ON d.id = c.document_id WHERE c.document_id = $1',
        [docId],
      );
      // Nothing embedded before the stop was embedded again.
      const now = new Map(after.rows.map((r) => [r.id, r.embedded_by]));
      for (const r of before.rows) expect(now.get(r.id)).toBe(r.embedded_by);
      expect(after.rows[0]?.attempts).toBe(2);

      // A document whose ingestion was taken over MAX_ATTEMPTS times is given up on.
      await b.server.ctx.db.query(
        "UPDATE kb_documents SET status = 'processing', phase = 'embedding', attempts = $2, lease_owner = 'ing_gone', lease_until = now() - interval '1 second', completed_at = NULL WHERE id = $1",
        [docId, MAX_ATTEMPTS],
      );
      b.server.app.knowledgeIngestor.kick();
      const failed = await eventually(async () => {
        const d = (await b.api('GET', path, undefined, buyerKey)).json as unknown as Doc;
        return d.status === 'failed' ? d : undefined;
      }, 20_000);
      expect(failed.error).toBe(`ingestion was interrupted ${MAX_ATTEMPTS} times; upload the document again`);
    } finally {
      await b.close();
    }
  }, 120_000);
});

describe('no embeddings batch is paid twice when ingestion is taken over mid-batch', () => {
  let f: GatewayFixture;
  const started: Ingestor[] = [];
  beforeAll(async () => {
    f = await startGatewayFixture({
      env: { SVC_KB_LEASE_SECONDS: '2', SVC_KB_EMBED_BATCH: '4', SVC_KB_EMBED_CONCURRENCY: '1' },
    });
  });
  afterAll(async () => {
    for (const ingestor of started) ingestor.halt();
    await f.close();
  });

  type Batch = { id: string; status: string; charged_cents: number | null; chunk_ids: string[] };
  const batches = async (docId: string) =>
    (
      await f.server.ctx.db.query<Batch>(
        "SELECT id, status, charged_cents, ARRAY(SELECT jsonb_array_elements_text(metadata->'audit'->'chunk_ids')) AS chunk_ids FROM gateway_requests WHERE metadata->'audit'->>'document_id' = $1 ORDER BY created_at",
        [docId],
      )
    ).rows;
  const embeddedBy = async (docId: string) =>
    new Map(
      (
        await f.server.ctx.db.query<{ id: string; embedded_by: string | null }>(
          'SELECT id, embedded_by FROM kb_chunks WHERE document_id = $1',
          [docId],
        )
      ).rows.map((r) => [r.id, r.embedded_by]),
    );
  /** Another instance on the same store (the test's own ingestor loop, as `svc serve` starts one). */
  const anotherInstance = () => {
    const ingestor = startIngestor(f.server.ctx, { sweepMs: 200 });
    started.push(ingestor);
    return ingestor;
  };

  it('stores the vectors of a batch that completed after the stop, and cancels one still running at the takeover', async () => {
    const node = await f.addNode({ upstream: { delayMs: 600 } });
    const kbId = String(
      (await f.api('POST', '/api/v1/knowledge-bases', { name: 'kb', chunk_size: 32, chunk_overlap: 0 })).json.id,
    );
    const docId = String(
      (await f.api('POST', `/api/v1/knowledge-bases/${kbId}/documents`, { name: 'notes.txt', text: prose(3000) })).json
        .id,
    );

    // 1. The first instance stops while a batch is on the node; the node finishes it and it is paid.
    const paidBeforeTakeover = await eventually(
      async () => (await batches(docId)).find((b) => b.status === 'running'),
      30_000,
    );
    f.server.app.knowledgeIngestor.halt();
    const completed = await eventually(
      async () => (await batches(docId)).find((b) => b.id === paidBeforeTakeover.id && b.status === 'completed'),
      10_000,
    );
    const unstored = await embeddedBy(docId);
    expect(completed.chunk_ids.every((id) => unstored.get(id) === null)).toBe(true);

    // 2. A second instance takes over: it stores that batch's vectors from its result, then stops
    //    (as the first did) while its next batch runs slowly on the node.
    const upstream = node.upstream;
    if (!upstream) throw new Error('the node has no test upstream');
    upstream.setDelay(8_000);
    const asked = upstream.requests.length;
    const second = anotherInstance();
    await eventually(async () => {
      const now = await embeddedBy(docId);
      return completed.chunk_ids.every((id) => now.get(id) === completed.id);
    }, 20_000);
    // Running, and on the upstream (so the 8 s delay applies to it).
    await eventually(() => upstream.requests.length > asked, 20_000);
    const stillRunning = await eventually(
      async () => (await batches(docId)).find((b) => b.status === 'running'),
      20_000,
    );
    second.halt();

    // 3. A third takes over while that batch is still on the node: it cancels it and embeds the rest.
    upstream.setDelay(0);
    anotherInstance();
    const path = `/api/v1/knowledge-bases/${kbId}/documents/${docId}`;
    const doc = await eventually(async () => {
      const d = (await f.api('GET', path)).json as unknown as Doc;
      if (d.status === 'failed') throw new Error(`failed: ${d.error}`);
      return d.status === 'ready' ? d : undefined;
    }, 30_000);
    expect(doc.embedded_count).toBe(doc.chunk_count);

    // A batch's request is opened and closed by the records its instance writes behind the answer
    // (a short batch's opening waits for its completion in the writer: until then it is not in the
    // store at all): read them once the writer has written them and none is running any more.
    const all = await eventually(async () => {
      await f.server.ctx.writer.settled();
      const now = await batches(docId);
      return now.some((b) => b.status === 'running') ? undefined : now;
    }, 20_000);
    const final = await embeddedBy(docId);
    expect(all.find((b) => b.id === stillRunning.id)).toMatchObject({ status: 'cancelled', charged_cents: 0 });
    // Every batch that was paid for is the one that embedded its chunks: nothing was paid twice.
    const paid = all.filter((b) => b.status === 'completed');
    for (const b of paid) for (const id of b.chunk_ids) expect(final.get(id)).toBe(b.id);
    expect(new Set(final.values()).size).toBe(paid.length);
    expect(paid.reduce((n, b) => n + b.chunk_ids.length, 0)).toBe(doc.chunk_count);
  }, 90_000);
});

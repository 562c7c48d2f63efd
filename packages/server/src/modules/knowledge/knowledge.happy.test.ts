import { createHash } from 'node:crypto';
import { verifyBundle } from '@svc/protocol/verify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { svc1VerifiesIndependently } from '../../../test/harness.js';
import {
  eventually,
  startGatewayFixture,
  type GatewayFixture,
  type GatewayNode,
} from '../../../test/gateway-fixture.js';
import { createTextPdf, SOURDOUGH_FACTS, TIDE_FACTS, VOLCANO_FACTS } from '../../../test/documents.js';
import { retrievalsFor } from './retrieval.js';

type Json = Record<string, unknown>;
type Receipt = {
  id: string;
  job_id: string;
  node_id: string;
  node_public_key: string;
  result_hash: string;
  metering_units: number;
  signature: string;
  metadata: Json;
};
type Source = {
  index: number;
  document_id: string;
  document_name: string;
  chunk_id: string;
  chunk_index: number;
  score: number;
  sha256: string;
  text: string;
};

const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');

describe('knowledge bases end to end: upload, ingestion on a real node, search, grounded chat with provenance', () => {
  let f: GatewayFixture;
  let node: GatewayNode;
  let kbId: string;
  const docs: Record<'volcano' | 'sourdough' | 'tides', string> = { volcano: '', sourdough: '', tides: '' };

  const receiptsOf = async (id: string) =>
    (await f.api('GET', `/api/v1/job/receipts/${id}`)).json.receipts as Receipt[];
  const upload = async (form: FormData) => {
    const res = await fetch(`${f.server.url}/api/v1/knowledge-bases/${kbId}/documents`, {
      method: 'POST',
      headers: { authorization: `Bearer ${f.buyer.apiKey}` },
      body: form,
    });
    return { status: res.status, json: (await res.json()) as Json };
  };
  const ready = (id: string) =>
    eventually(async () => {
      const doc = (await f.api('GET', `/api/v1/knowledge-bases/${kbId}/documents/${id}`)).json;
      if (doc.status === 'failed') throw new Error(`document failed: ${String(doc.error)}`);
      return doc.status === 'ready' ? doc : undefined;
    }, 30_000);

  beforeAll(async () => {
    f = await startGatewayFixture();
    node = await f.addNode({ country: 'CA' });
  });
  afterAll(() => f.close());

  it('creates a knowledge base with the default embedding model and lists it', async () => {
    const created = await f.api('POST', '/api/v1/knowledge-bases', {
      name: 'Field notes',
      chunk_size: 64,
      chunk_overlap: 16,
    });
    expect(created.status).toBe(201);
    expect(created.json).toMatchObject({
      object: 'knowledge_base',
      name: 'Field notes',
      embedding_model: 'all-MiniLM-L6-v2',
      dimensions: 384,
      chunk_size: 64,
      chunk_overlap: 16,
      document_count: 0,
    });
    expect(created.json.id).toMatch(/^kb_[0-9a-z]{26}$/);
    expect(['hnsw', 'exact']).toContain(created.json.search);
    kbId = String(created.json.id);
    const list = await f.api('GET', '/api/v1/knowledge-bases');
    expect((list.json.knowledge_bases as Json[]).map((k) => k.id)).toEqual([kbId]);
    expect((await f.api('GET', `/api/v1/knowledge-bases/${kbId}`)).json).toMatchObject({
      id: kbId,
      name: 'Field notes',
    });
  });

  it('takes Markdown as JSON, HTML and PDF as multipart files: 202 processing, then ready with every chunk embedded', async () => {
    const md = await f.api('POST', `/api/v1/knowledge-bases/${kbId}/documents`, {
      name: 'volcanoes.md',
      text: `# Volcanoes\n\n${VOLCANO_FACTS.join('\n\n')}`,
    });
    expect(md.status).toBe(202);
    expect(md.json).toMatchObject({
      object: 'knowledge_base.document',
      knowledge_base_id: kbId,
      name: 'volcanoes.md',
      content_type: 'text/markdown',
      status: 'processing',
      chunk_count: 0,
    });
    docs.volcano = String(md.json.id);

    const html = new FormData();
    html.append(
      'file',
      new Blob(
        [
          `<!doctype html><html><body><h1>Sourdough</h1>${SOURDOUGH_FACTS.map((s) => `<p>${s}</p>`).join('')}<script>ignored()</script></body></html>`,
        ],
        { type: 'text/html' },
      ),
      'sourdough.html',
    );
    const h = await upload(html);
    expect(h.status).toBe(202);
    expect(h.json).toMatchObject({ name: 'sourdough.html', content_type: 'text/html', status: 'processing' });
    docs.sourdough = String(h.json.id);

    const pdf = new FormData();
    pdf.append(
      'file',
      new Blob([createTextPdf([TIDE_FACTS.slice(0, 3), TIDE_FACTS.slice(3)])], { type: 'application/octet-stream' }),
      'tides.pdf',
    );
    pdf.append('name', 'Tides primer');
    const p = await upload(pdf);
    expect(p.status).toBe(202);
    expect(p.json).toMatchObject({ name: 'Tides primer', content_type: 'application/pdf' });
    docs.tides = String(p.json.id);

    for (const id of Object.values(docs)) {
      const doc = await ready(id);
      expect(doc.chunk_count).toBeGreaterThan(1);
      expect(doc).toMatchObject({ embedded_count: doc.chunk_count, progress: 1, phase: 'done', error: null });
    }
    expect((await ready(docs.tides)).pages).toBe(2);
    const list = await f.api('GET', `/api/v1/knowledge-bases/${kbId}/documents`);
    expect((list.json.documents as Json[]).map((d) => d.id)).toEqual([docs.volcano, docs.sourdough, docs.tides]);
    expect(list.json.total).toBe(3);
    const kb = (await f.api('GET', `/api/v1/knowledge-bases/${kbId}`)).json;
    expect(kb.document_count).toBe(3);

    // Every chunk was embedded by an embeddings request on the node, whose SVC1 receipt names its chunks.
    const { rows } = await f.server.ctx.db.query<{ embedded_by: string; id: string; text: string }>(
      'SELECT embedded_by, id, text FROM kb_chunks WHERE document_id = $1 ORDER BY ordinal',
      [docs.volcano],
    );
    expect(rows.every((r) => /^emb-[0-9a-z]{26}$/.test(r.embedded_by))).toBe(true);
    expect(rows.map((r) => r.text).join(' ')).not.toContain('#');
    const [receipt] = await receiptsOf(rows[0]?.embedded_by ?? '');
    expect(receipt?.node_id).toBe(node.nodeId);
    expect(svc1VerifiesIndependently(receipt as Receipt)).toBe(true);
    expect(receipt?.metadata).toMatchObject({
      purpose: 'knowledge_base_ingestion',
      knowledge_base_id: kbId,
      document_id: docs.volcano,
      model: 'all-MiniLM-L6-v2',
      request_type: 'embeddings',
    });
    expect(receipt?.metadata.chunk_ids).toEqual(expect.arrayContaining([rows[0]?.id]));
    // ...and was billed through the ledger like any other request: one charge row on the usage
    // the node signed (here a fraction of a cent, kept as the account's sub-cent carry), no hold
    // (DESIGN.md section 7, revised 2026-11-27).
    const billed = await f.server.ctx.db.query<{
      status: string;
      tokens: number;
      hold: string | null;
      charges: number;
    }>(
      `SELECT g.status, (g.usage->>'prompt_tokens')::int AS tokens, g.hold_id AS hold,
              (SELECT count(*)::int FROM credit_transactions t WHERE t.ref = g.id AND t.tx_type = 'charge') AS charges
         FROM gateway_requests g
        WHERE g.id IN (SELECT embedded_by FROM kb_chunks WHERE kb_id = $1)`,
      [kbId],
    );
    expect(billed.rows.length).toBeGreaterThan(0);
    for (const r of billed.rows) expect(r).toMatchObject({ status: 'completed', hold: null, charges: 1 });
    expect(billed.rows.every((r) => r.tokens > 0)).toBe(true);
    const account = await f.server.ctx.db.query<{ carry: number }>(
      'SELECT carry_micro AS carry FROM credit_accounts WHERE org_id = $1',
      [f.buyer.orgId],
    );
    expect(account.rows[0]?.carry).toBeGreaterThan(0);
  });

  it('searches: the chunks of the document about the question come first, with scores and document ids', async () => {
    const res = await f.api('POST', `/api/v1/knowledge-bases/${kbId}/search`, {
      query: 'How hot is the lava of a volcano eruption?',
      top_k: 3,
    });
    expect(res.status).toBe(200);
    const results = res.json.results as Source[];
    expect(results).toHaveLength(3);
    expect(results[0]?.document_id).toBe(docs.volcano);
    expect(results[0]?.text).toContain('lava');
    expect(results[0]?.document_name).toBe('volcanoes.md');
    const scores = results.map((r) => r.score);
    expect([...scores].sort((a, b) => b - a)).toEqual(scores);
    expect(scores[0]).toBeGreaterThan(0.2);
    expect(res.json.query_request_id).toMatch(/^emb-/);
    const tides = (
      await f.api('POST', `/api/v1/knowledge-bases/${kbId}/search`, {
        query: 'When do spring tides and neap tides happen with the moon?',
      })
    ).json.results as Source[];
    expect(tides[0]?.document_id).toBe(docs.tides);
  });

  it('grounds a chat in the knowledge base: the right chunks go to the model, come back in sources and are recorded in the receipt and the store', async () => {
    const question = 'Which volcano erupts lava almost every year?';
    const res = await f.api('POST', '/v1/chat/completions', {
      model: 'tinyllama',
      messages: [{ role: 'user', content: question }],
      knowledge_base: kbId,
      knowledge_base_top_k: 3,
    });
    expect(res.status).toBe(200);
    const id = String(res.json.id);
    const sources = res.json.sources as Source[];
    expect(sources).toHaveLength(3);
    expect(sources[0]).toMatchObject({ index: 1, document_id: docs.volcano, document_name: 'volcanoes.md' });
    expect(sources[0]?.text).toContain('Etna');
    for (const s of sources) expect(s.sha256).toBe(sha256(s.text));

    // The model saw the sources, numbered for citation, before the question.
    const sent = node.upstream?.requests.filter((r) => r.path === '/v1/chat/completions').at(-1)?.body as {
      messages: { role: string; content: string }[];
    };
    expect(sent.messages[0]?.role).toBe('system');
    expect(sent.messages[0]?.content).toContain(`[1] volcanoes.md (chunk ${sources[0]?.chunk_index})`);
    expect(sent.messages[0]?.content).toContain(sources[0]?.text);
    expect(sent.messages.at(-1)).toEqual({ role: 'user', content: question });

    // The receipt's metadata (outside the SVC1 signature) records each retrieved chunk.
    const [receipt] = await receiptsOf(id);
    expect(svc1VerifiesIndependently(receipt as Receipt)).toBe(true);
    const retrieval = receipt?.metadata.retrieval as {
      knowledge_base_id: string;
      query_request_id: string;
      chunks: Json[];
    };
    expect(retrieval.knowledge_base_id).toBe(kbId);
    expect(retrieval.chunks).toEqual(
      sources.map((s, i) => ({
        rank: i + 1,
        document_id: s.document_id,
        chunk_id: s.chunk_id,
        sha256: s.sha256,
        score: s.score,
      })),
    );
    // The question's embedding has a receipt of its own, pointing back at the chat.
    const [queryReceipt] = await receiptsOf(retrieval.query_request_id);
    expect(queryReceipt?.metadata).toMatchObject({
      purpose: 'knowledge_base_query',
      knowledge_base_id: kbId,
      for_request_id: id,
    });

    // Durable provenance, for the request's evidence run.
    const recorded = await retrievalsFor(f.server.ctx.db, id);
    expect(recorded.map((r) => [r.rank, r.document_id, r.chunk_id, r.chunk_sha256, r.score])).toEqual(
      sources.map((s, i) => [i + 1, s.document_id, s.chunk_id, s.sha256, s.score]),
    );
    expect(recorded[0]?.query_request_id).toBe(retrieval.query_request_id);

    // The request's evidence run records the retrieval as an event, covered by the signed root,
    // and the downloadable bundle still verifies offline (what `svc verify` runs).
    const graph = (await f.api('GET', `/api/v1/jobs/${id}/evidence`)).json as {
      events: { event_type: string; metadata: Json }[];
      certificate: Json;
    };
    expect(graph.events.map((e) => e.event_type).slice(0, 3)).toEqual([
      'request.received',
      'knowledge.retrieved',
      'policy.evaluated',
    ]);
    expect(graph.events[1]?.metadata).toEqual(retrieval);
    expect(graph.events.at(-1)?.event_type).toBe('request.completed');
    expect(graph.certificate).toMatchObject({ signed: true, verified: true });
    const bundle = (await f.api('GET', `/api/v1/jobs/${id}/evidence/bundle`)).text;
    expect(bundle).toContain('knowledge.retrieved');
    for (const s of sources) expect(bundle).toContain(s.sha256);
    const keys = (await f.api('GET', '/api/v1/keys/platform')).json.keys as { public_key_hex: string }[];
    const verified = await verifyBundle(bundle, { trustedKeys: keys });
    expect(verified.checks.filter((c) => !c.ok)).toEqual([]);
    expect(verified.ok).toBe(true);
    // A bundle whose retrieval was altered (another chunk's hash) fails the check.
    expect(
      (await verifyBundle(bundle.replace(sources[0]?.sha256 ?? '', 'f'.repeat(64)), { trustedKeys: keys })).ok,
    ).toBe(false);
  });

  it('streams a grounded chat with the sources on the first chunk', async () => {
    const res = await fetch(`${f.server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${f.buyer.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'tinyllama',
        messages: [{ role: 'user', content: 'How much water per kilogram of flour in sourdough dough?' }],
        knowledge_base: kbId,
        stream: true,
      }),
    });
    expect(res.status).toBe(200);
    const events = (await res.text())
      .split('\n\n')
      .filter((e) => e.startsWith('data: '))
      .map((e) => e.slice(6));
    expect(events.at(-1)).toBe('[DONE]');
    const first = JSON.parse(events[0] ?? '{}') as { sources?: Source[]; id: string };
    expect(first.sources?.[0]?.document_id).toBe(docs.sourdough);
    // Read from the store directly: the request's records (its retrievals with it) may still be
    // in the writer behind the answer (docs/gateway.md, "Read-your-writes").
    await f.server.ctx.writer.settled();
    expect(await retrievalsFor(f.server.ctx.db, first.id)).toHaveLength(first.sources?.length ?? -1);
  });

  it('deletes a document and then the knowledge base; retrieval records stay', async () => {
    const del = await f.api('DELETE', `/api/v1/knowledge-bases/${kbId}/documents/${docs.tides}`);
    expect(del.json).toEqual({ id: docs.tides, deleted: true });
    expect((await f.api('GET', `/api/v1/knowledge-bases/${kbId}/documents/${docs.tides}`)).status).toBe(404);
    const results = (
      await f.api('POST', `/api/v1/knowledge-bases/${kbId}/search`, {
        query: 'spring tides neap tides moon',
        top_k: 50,
      })
    ).json.results as Source[];
    expect(results.some((r) => r.document_id === docs.tides)).toBe(false);
    expect((await f.api('DELETE', `/api/v1/knowledge-bases/${kbId}`)).json).toEqual({ id: kbId, deleted: true });
    expect((await f.api('GET', `/api/v1/knowledge-bases/${kbId}`)).status).toBe(404);
    const { rows } = await f.server.ctx.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM kb_chunks WHERE kb_id = $1',
      [kbId],
    );
    expect(rows[0]?.n).toBe(0);
    const kept = await f.server.ctx.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM kb_retrievals WHERE kb_id = $1',
      [kbId],
    );
    expect(kept.rows[0]?.n).toBeGreaterThan(0);
  });
});

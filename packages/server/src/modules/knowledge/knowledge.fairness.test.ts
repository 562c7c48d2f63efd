import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createTestApp, signUp, type TestApp, type TestBuyer } from '../../../test/harness.js';
import { eventually, startGatewayFixture, type GatewayFixture } from '../../../test/gateway-fixture.js';
import { prose } from '../../../test/documents.js';
import { claimDocument, fairerTurnWaiting, releaseLease } from './store.js';

type Doc = { id: string; status: string; phase: string; chunk_count: number; embedded_count: number };

describe('knowledge ingestion is fair across organizations', () => {
  let f: GatewayFixture;
  beforeAll(async () => {
    // Two chunks per request, one request at a time per document, 400 ms per request on the node:
    // a document of a few hundred chunks takes over a minute, deterministically.
    f = await startGatewayFixture({ env: { SVC_KB_EMBED_BATCH: '2', SVC_KB_EMBED_CONCURRENCY: '1' } });
    await f.addNode({ upstream: { delayMs: 400 }, concurrency: 8 });
  });
  afterAll(() => f.close());

  it("a 40-byte document is ready within seconds while another organization's two large documents are still ingested", async () => {
    const kbA = String(
      (await f.api('POST', '/api/v1/knowledge-bases', { name: 'big', chunk_size: 32, chunk_overlap: 0 })).json.id,
    );
    const large = async (name: string) =>
      String((await f.api('POST', `/api/v1/knowledge-bases/${kbA}/documents`, { name, text: prose(40_000) })).json.id);
    const a = [await large('a1.txt'), await large('a2.txt')];
    const docA = async (id: string) =>
      (await f.api('GET', `/api/v1/knowledge-bases/${kbA}/documents/${id}`)).json as unknown as Doc;
    // Both of the instance's ingestion slots are taken by the first organization's documents.
    await eventually(async () => {
      const docs = await Promise.all(a.map(docA));
      return docs.every((d) => d.phase === 'embedding' && d.embedded_count > 0);
    }, 30_000);

    const other = await signUp(f.server.app);
    const kbB = String((await f.api('POST', '/api/v1/knowledge-bases', { name: 'small' }, other.apiKey)).json.id);
    const uploaded = Date.now();
    const small = String(
      (
        await f.api(
          'POST',
          `/api/v1/knowledge-bases/${kbB}/documents`,
          { name: 'note.txt', text: 'Mount Etna erupts lava almost every year.' },
          other.apiKey,
        )
      ).json.id,
    );
    const ready = await eventually(async () => {
      const d = (await f.api('GET', `/api/v1/knowledge-bases/${kbB}/documents/${small}`, undefined, other.apiKey))
        .json as unknown as Doc;
      return d.status === 'ready' ? d : undefined;
    }, 30_000);
    const waited = Date.now() - uploaded;
    expect(ready).toMatchObject({ chunk_count: 1, embedded_count: 1 });
    // The default turn is 5 s: the small document waits at most about one turn and one request.
    expect(waited).toBeLessThan(12_000);
    // ...while the large ones are still being ingested, neither of them failed nor restarted.
    for (const d of await Promise.all(a.map(docA))) {
      expect(d.status).toBe('processing');
      expect(d.embedded_count).toBeGreaterThan(0);
      expect(d.embedded_count).toBeLessThan(d.chunk_count);
    }
    const { rows } = await f.server.ctx.db.query<{ attempts: number }>(
      'SELECT attempts FROM kb_documents WHERE id = ANY($1::text[]) ORDER BY id',
      [`{${a.join(',')}}`],
    );
    // A yielded turn is not an interruption: no attempt is counted for it.
    expect(rows.map((r) => r.attempts).every((n) => n <= 1)).toBe(true);
  }, 120_000);
});

describe('the ingestion queue in the store: organizations with fewer documents in progress first', () => {
  let t: TestApp;
  let a: TestBuyer;
  let b: TestBuyer;
  beforeAll(async () => {
    t = await createTestApp();
    // Nothing ingests here: the test takes documents itself, as instances sharing the store would.
    t.app.knowledgeIngestor.halt();
    a = await signUp(t.app);
    b = await signUp(t.app);
  });
  afterAll(() => t.close());

  const upload = async (buyer: TestBuyer, kb: string, name: string) => {
    const res = await t.app.inject({
      method: 'POST',
      url: `/api/v1/knowledge-bases/${kb}/documents`,
      headers: bearer(buyer.apiKey),
      payload: { name, text: `The text of ${name}.` },
    });
    expect(res.statusCode).toBe(202);
    return String((res.json() as { id: string }).id);
  };
  const kbOf = async (buyer: TestBuyer) => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/api/v1/knowledge-bases',
      headers: bearer(buyer.apiKey),
      payload: { name: 'kb' },
    });
    return String((res.json() as { id: string }).id);
  };

  it('takes turns between organizations across instances, and a yielded document goes to the back', async () => {
    const kbA = await kbOf(a);
    const kbB = await kbOf(b);
    const a1 = await upload(a, kbA, 'a1');
    const a2 = await upload(a, kbA, 'a2');
    const a3 = await upload(a, kbA, 'a3');
    const b1 = await upload(b, kbB, 'b1');
    const take = async (owner: string) => (await claimDocument(t.ctx.db, owner, 60))?.id;

    expect(await take('ing_one')).toBe(a1);
    // a2 is older, but its organization already has a document in progress and b's has none.
    expect(await take('ing_two')).toBe(b1);
    expect(await fairerTurnWaiting(t.ctx.db, a.orgId)).toBe(false);
    // One each in progress: the oldest waiting document.
    expect(await take('ing_two')).toBe(a2);
    // a now has two in progress and b none waiting: a's documents wait on nobody.
    expect(await fairerTurnWaiting(t.ctx.db, a.orgId)).toBe(false);
    const b2 = await upload(b, kbB, 'b2');
    // b2 waits, and its organization has fewer documents in progress than a's: a's turn is over.
    expect(await fairerTurnWaiting(t.ctx.db, a.orgId)).toBe(true);
    expect(await fairerTurnWaiting(t.ctx.db, b.orgId)).toBe(false);
    // a1 yields its turn: it queues behind the documents already waiting. With one document in
    // progress each, a3 (uploaded before b2) comes first; then b's organization has fewer.
    await releaseLease(t.ctx.db, a1, 'ing_one', { requeue: true });
    expect(await take('ing_one')).toBe(a3);
    expect(await take('ing_one')).toBe(b2);
    expect(await take('ing_one')).toBe(a1);
    expect(await take('ing_one')).toBeUndefined();
    const { rows } = await t.ctx.db.query<{ id: string; attempts: number }>(
      'SELECT id, attempts FROM kb_documents WHERE id = $1',
      [a1],
    );
    // Taken twice, one of them given back: one attempt.
    expect(rows[0]?.attempts).toBe(1);
  });
});

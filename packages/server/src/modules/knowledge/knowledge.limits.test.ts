import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTestApp,
  createTestStore,
  signUp,
  startTestServer,
  type TestApp,
  type TestBuyer,
} from '../../../test/harness.js';
import { eventually } from '../../../test/gateway-fixture.js';
import { markdownNesting, parseDocument, parseWorkersStarted, type ParseLimits } from './parse.js';

type Doc = { id: string; status: string; error: string | null };

/** A Markdown list nested `levels` deep: 3,000 levels is about 9 MB. */
export function nestedList(levels: number): string {
  return Array.from({ length: levels }, (_, i) => `${' '.repeat(2 * i)}- item ${i}`).join('\n');
}

describe('ingestion limits: a hostile document fails alone, with a reason, and the server stays up', () => {
  let server: Awaited<ReturnType<typeof startTestServer>>;
  let buyer: TestBuyer;
  let kbId = '';
  const defaults = { maxNesting: 0, heapMb: 0, timeoutMs: 0, maxChunks: 0 };
  beforeAll(async () => {
    server = await startTestServer();
    Object.assign(defaults, server.ctx.config.knowledge.parse);
    buyer = await signUp(server.app);
    const kb = await server.app.inject({
      method: 'POST',
      url: '/api/v1/knowledge-bases',
      headers: { authorization: `Bearer ${buyer.apiKey}` },
      payload: { name: 'limits' },
    });
    kbId = kb.json().id as string;
  });
  afterAll(() => server.stop());

  async function ingest(text: string, name: string): Promise<Doc> {
    const form = new FormData();
    form.append('file', new Blob([text], { type: name.endsWith('.md') ? 'text/markdown' : 'text/plain' }), name);
    const res = await fetch(`${server.url}/api/v1/knowledge-bases/${kbId}/documents`, {
      method: 'POST',
      headers: { authorization: `Bearer ${buyer.apiKey}` },
      body: form,
    });
    expect(res.status).toBe(202);
    const { id } = (await res.json()) as Doc;
    return eventually(async () => {
      // The server answers other requests while the document is parsed.
      const health = await fetch(`${server.url}/api/v1/health`);
      expect(health.status).toBe(200);
      const doc = (await (
        await fetch(`${server.url}/api/v1/knowledge-bases/${kbId}/documents/${id}`, {
          headers: { authorization: `Bearer ${buyer.apiKey}` },
        })
      ).json()) as Doc;
      return doc.status === 'processing' ? undefined : doc;
    }, 90_000);
  }

  it('estimates nesting from indentation and quote markers', () => {
    expect(markdownNesting('# t\n\n- a\n  - b\n    - c\n')).toBe(2);
    expect(markdownNesting('> > > quoted')).toBe(3);
    expect(markdownNesting(nestedList(3000))).toBe(2999);
  });

  it('a 9 MB Markdown list nested 3,000 levels fails on the nesting limit', async () => {
    const text = nestedList(3000);
    expect(text.length).toBeGreaterThan(9_000_000);
    const doc = await ingest(text, 'nested.md');
    expect(doc).toMatchObject({
      status: 'failed',
      error: `the document nests about 2999 levels deep (lists, quotes or indentation); the limit is ${defaults.maxNesting}`,
    });
  }, 120_000);

  it('past the nesting check, the same document blows the worker heap, not the server', async () => {
    Object.assign(server.ctx.config.knowledge.parse, { maxNesting: 100_000, heapMb: 64 });
    try {
      const doc = await ingest(nestedList(3000), 'nested-again.md');
      expect(doc).toMatchObject({ status: 'failed', error: 'parsing the document needed more than 64 MB of memory' });
      expect(process.memoryUsage().heapUsed).toBeLessThan(1024 * 1024 * 1024);
    } finally {
      Object.assign(server.ctx.config.knowledge.parse, defaults);
    }
  }, 120_000);

  it('a parse past its deadline is stopped', async () => {
    Object.assign(server.ctx.config.knowledge.parse, { timeoutMs: 150 });
    try {
      // 2 million words: seconds of chunking, even in a worker already started.
      const doc = await ingest('word '.repeat(2_000_000), 'slow.txt');
      expect(doc).toMatchObject({ status: 'failed', error: 'parsing the document took longer than 150 ms' });
    } finally {
      Object.assign(server.ctx.config.knowledge.parse, defaults);
    }
  }, 120_000);

  it('a document making more chunks than allowed fails', async () => {
    Object.assign(server.ctx.config.knowledge.parse, { maxChunks: 2 });
    try {
      const doc = await ingest(
        Array.from({ length: 400 }, (_, i) => `Paragraph ${i} says something about rivers and granite.`).join('\n\n'),
        'many.txt',
      );
      expect(doc.status).toBe('failed');
      expect(doc.error).toMatch(/^the document makes \d+ chunks; the limit is 2$/);
    } finally {
      Object.assign(server.ctx.config.knowledge.parse, defaults);
    }
  }, 120_000);
});

describe('resumed ingestion starts only once the server listens', () => {
  it('a waiting document is not touched while the app is built, and is claimed (attempt counted) after listen', async () => {
    const store = await createTestStore();
    let second: TestApp | undefined;
    try {
      // A first instance takes an upload and stops before ingesting it (as a crash would).
      const first = await createTestApp({ store });
      first.app.knowledgeIngestor.halt();
      const buyer = await signUp(first.app);
      const auth = { authorization: `Bearer ${buyer.apiKey}` };
      const kb = await first.app.inject({
        method: 'POST',
        url: '/api/v1/knowledge-bases',
        headers: auth,
        payload: { name: 'resume' },
      });
      const upload = await first.app.inject({
        method: 'POST',
        url: `/api/v1/knowledge-bases/${kb.json().id as string}/documents`,
        headers: auth,
        payload: { name: 'a.txt', text: 'some text' },
      });
      expect(upload.statusCode).toBe(202);
      await first.close();
      // The next instance is built (routes, ingestor) but not listening yet: it leaves the document alone.
      const next = await createTestApp({ store });
      second = next;
      const attempts = async () =>
        (
          await next.ctx.db.query<{ attempts: number }>('SELECT attempts FROM kb_documents WHERE id = $1', [
            upload.json().id,
          ])
        ).rows[0]?.attempts;
      await next.app.ready();
      expect(next.app.knowledgeIngestor.sweeping).toBe(false);
      expect(await attempts()).toBe(0);
      await next.app.listen({ port: 0, host: '127.0.0.1' });
      expect(next.app.knowledgeIngestor.sweeping).toBe(true);
      // Claimed once it listens: the attempt is written before any work starts.
      expect(await eventually(async () => ((await attempts()) ?? 0) >= 1 && (await attempts()), 20_000)).toBe(1);
    } finally {
      await second?.close();
      await store.drop();
    }
  }, 60_000);
});

describe('parse workers', () => {
  it('reuses a worker that answered (a refusal too), never one that ran past its deadline or has another heap limit', async () => {
    const limits: ParseLimits = {
      maxNesting: 100,
      maxTextChars: 20_000_000,
      maxChunks: 1000,
      heapMb: 96,
      timeoutMs: 30_000,
      isolation: 'worker',
    };
    const input = (text: string) => ({
      bytes: Buffer.from(text),
      format: 'text/plain' as const,
      chunkSize: 200,
      chunkOverlap: 40,
    });
    const before = parseWorkersStarted();
    expect((await parseDocument(input('One note.'), limits)).chunks.map((c) => c.text)).toEqual(['One note.']);
    expect((await parseDocument(input('Another note.'), limits)).chunks.map((c) => c.text)).toEqual(['Another note.']);
    await expect(parseDocument(input('A third note.'), { ...limits, maxChunks: 0 })).rejects.toThrow(
      'the document makes 1 chunks; the limit is 0',
    );
    expect(parseWorkersStarted()).toBe(before + 1);
    // Stopped at its deadline: the worker is gone, the next document gets a new one.
    await expect(parseDocument(input('word '.repeat(2_000_000)), { ...limits, timeoutMs: 100 })).rejects.toThrow(
      'parsing the document took longer than 100 ms',
    );
    expect((await parseDocument(input('After the deadline.'), limits)).chunks).toHaveLength(1);
    expect(parseWorkersStarted()).toBe(before + 2);
    // A worker's heap limit is set when it starts: another limit, another worker.
    expect((await parseDocument(input('Smaller heap.'), { ...limits, heapMb: 64 })).chunks).toHaveLength(1);
    expect(parseWorkersStarted()).toBe(before + 3);
  }, 60_000);
});

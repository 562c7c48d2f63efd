import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createTestApp, signUp, type TestApp, type TestBuyer } from '../../../test/harness.js';
import { eventually } from '../../../test/gateway-fixture.js';
import { createTextPdf } from '../../../test/documents.js';

const BOUNDARY = 'svc-test-boundary';

/** A multipart/form-data body by hand: the form's text fields, then at most one file. */
function multipart(fields: Record<string, string>, file?: { name: string; type: string; bytes: Buffer }) {
  const parts: Buffer[] = Object.entries(fields).map(([k, v]) =>
    Buffer.from(`--${BOUNDARY}\r\ncontent-disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`),
  );
  if (file) {
    parts.push(
      Buffer.from(
        `--${BOUNDARY}\r\ncontent-disposition: form-data; name="file"; filename="${file.name}"\r\ncontent-type: ${file.type}\r\n\r\n`,
      ),
      file.bytes,
      Buffer.from('\r\n'),
    );
  }
  parts.push(Buffer.from(`--${BOUNDARY}--\r\n`));
  return { payload: Buffer.concat(parts), headers: { 'content-type': `multipart/form-data; boundary=${BOUNDARY}` } };
}

describe('knowledge bases: validation and failures', () => {
  let t: TestApp;
  let buyer: TestBuyer;
  let kbId: string;
  const api = (method: 'GET' | 'POST' | 'DELETE', url: string, payload?: unknown) =>
    t.app.inject({
      method,
      url,
      headers: bearer(buyer.apiKey),
      ...(payload === undefined ? {} : { payload: payload as Record<string, unknown> }),
    });
  const upload = (form: ReturnType<typeof multipart>) =>
    t.app.inject({
      method: 'POST',
      url: `/api/v1/knowledge-bases/${kbId}/documents`,
      headers: { ...bearer(buyer.apiKey), ...form.headers },
      payload: form.payload,
    });
  const settled = (id: string) =>
    eventually(async () => {
      const doc = (await api('GET', `/api/v1/knowledge-bases/${kbId}/documents/${id}`)).json();
      return doc.status === 'processing' ? undefined : doc;
    }, 20_000);

  beforeAll(async () => {
    // No node at all: ingestion cannot embed. Retries are quick here; documents are small.
    t = await createTestApp({
      env: {
        SVC_KB_RETRY_MS: '10',
        SVC_KB_MAX_DOCUMENT_BYTES: '4096',
        SVC_RATE_LIMIT_BURST: '100000',
        SVC_ORG_RATE_LIMIT_BURST: '100000',
      },
    });
    buyer = await signUp(t.app);
    kbId = (await api('POST', '/api/v1/knowledge-bases', { name: 'kb' })).json().id;
  });
  afterAll(() => t.close());

  it('validates knowledge-base creation field by field', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{}, '/name'],
      [{ name: '' }, '/name'],
      [{ name: 'x', embedding_model: 'tinyllama' }, '/embedding_model'],
      [{ name: 'x', chunk_size: 8 }, '/chunk_size'],
      [{ name: 'x', chunk_size: 100, chunk_overlap: 60 }, '/chunk_overlap'],
      [{ name: 'x', colour: 'blue' }, '/colour'],
    ];
    for (const [body, path] of cases) {
      const res = await api('POST', '/api/v1/knowledge-bases', body);
      expect(res.statusCode).toBe(400);
      expect(res.json()).toMatchObject({ code: 400, error: 'invalid_request' });
      expect(res.json().details.map((d: { path: string }) => d.path)).toContain(path);
    }
    const nomic = await api('POST', '/api/v1/knowledge-bases', {
      name: 'wide',
      embedding_model: 'nomic-embed-text',
      chunk_size: 100,
      chunk_overlap: 50,
    });
    expect(nomic.json()).toMatchObject({ embedding_model: 'nomic-embed-text', dimensions: 768, chunk_overlap: 50 });
  });

  it('answers 400 for malformed ids and 404 for unknown ones', async () => {
    expect((await api('GET', '/api/v1/knowledge-bases/nope')).statusCode).toBe(400);
    expect((await api('GET', '/api/v1/knowledge-bases/kb_00000000000000000000000000')).json()).toMatchObject({
      code: 404,
      error: 'not_found',
    });
    expect(
      (await api('GET', `/api/v1/knowledge-bases/${kbId}/documents/doc_00000000000000000000000000`)).statusCode,
    ).toBe(404);
    expect(
      (await api('POST', '/api/v1/knowledge-bases/kb_00000000000000000000000000/documents', { name: 'a', text: 'b' }))
        .statusCode,
    ).toBe(404);
  });

  it('validates uploads: fields, size (413), binary files and fake PDFs (415), a form without a file', async () => {
    const url = `/api/v1/knowledge-bases/${kbId}/documents`;
    expect((await api('POST', url, { name: 'a.txt' })).json().details).toEqual([
      { path: '/text', message: "must have required property 'text'" },
    ]);
    expect((await api('POST', url, { name: 'a.txt', text: '' })).statusCode).toBe(400);
    expect((await api('POST', url, { name: 'a.txt', text: 'x', content_type: 'application/pdf' })).statusCode).toBe(
      400,
    );
    expect((await api('POST', url, { name: 'big.txt', text: 'x'.repeat(5000) })).json()).toMatchObject({
      code: 413,
      error: 'payload_too_large',
    });
    expect(
      (await upload(multipart({}, { name: 'big.txt', type: 'text/plain', bytes: Buffer.alloc(5000, 'y') }))).json(),
    ).toMatchObject({ code: 413, error: 'payload_too_large' });
    const png = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex');
    expect((await upload(multipart({}, { name: 'photo.png', type: 'image/png', bytes: png }))).json()).toMatchObject({
      code: 415,
      error: 'unsupported_media_type',
    });
    expect(
      (
        await upload(multipart({}, { name: 'report.pdf', type: 'application/pdf', bytes: Buffer.from('hello') }))
      ).json(),
    ).toMatchObject({ code: 415, error: 'unsupported_media_type' });
    expect((await upload(multipart({ name: 'x' }))).json()).toMatchObject({
      code: 400,
      error: 'invalid_request',
      details: [{ path: '/file', message: 'is required' }],
    });
    expect((await api('GET', `/api/v1/knowledge-bases/${kbId}/documents`)).json().total).toBe(0);
  });

  it('validates search', async () => {
    const url = `/api/v1/knowledge-bases/${kbId}/search`;
    expect((await api('POST', url, { query: '' })).statusCode).toBe(400);
    expect((await api('POST', url, { query: 'x', top_k: 0 })).statusCode).toBe(400);
    expect((await api('POST', url, { query: 'x', top_k: 51 })).statusCode).toBe(400);
    expect((await api('POST', url, { query: 'x' })).json()).toMatchObject({
      code: 503,
      error: 'no_capacity',
      message: 'no live node serves all-MiniLM-L6-v2',
    });
  });

  it('marks a document failed, with the reason, when no node can embed it, and holds nothing', async () => {
    const res = await api('POST', `/api/v1/knowledge-bases/${kbId}/documents`, {
      name: 'notes.md',
      text: '# Notes\n\nSome text worth keeping.',
    });
    expect(res.statusCode).toBe(202);
    const doc = await settled(res.json().id);
    expect(doc).toMatchObject({
      status: 'failed',
      phase: 'embedding',
      chunk_count: 1,
      embedded_count: 0,
      error: 'no live node serves all-MiniLM-L6-v2',
    });
    expect(doc.completed_at).not.toBeNull();
    // A failed document is never searched: its chunks are gone, its counts stay as information.
    const { rows } = await t.ctx.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM kb_chunks WHERE document_id = $1',
      [doc.id],
    );
    expect(rows[0]?.n).toBe(0);
    expect((await api('GET', '/api/v1/billing/balance')).json()).toMatchObject({ balance_cents: 500, held_cents: 0 });
  });

  it('marks unreadable documents failed: a broken PDF, a PDF with no text', async () => {
    const broken = await upload(
      multipart({}, { name: 'broken.pdf', type: 'application/pdf', bytes: Buffer.from('%PDF-1.7\n%garbage only') }),
    );
    expect(broken.statusCode).toBe(202);
    expect(await settled(broken.json().id)).toMatchObject({
      status: 'failed',
      chunk_count: 0,
      error: expect.stringContaining('the PDF could not be read'),
    });
    const scanned = await upload(
      multipart({}, { name: 'scan.pdf', type: 'application/pdf', bytes: createTextPdf([[]]) }),
    );
    expect(await settled(scanned.json().id)).toMatchObject({
      status: 'failed',
      error: 'the PDF has no extractable text (scanned pages are not OCRed)',
    });
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKey, signUp, type TestBuyer } from '../../../test/harness.js';
import { eventually, startGatewayFixture, type GatewayFixture } from '../../../test/gateway-fixture.js';
import { VOLCANO_FACTS } from '../../../test/documents.js';

type Json = Record<string, unknown>;

describe('knowledge bases: scopes and tenancy', () => {
  let f: GatewayFixture;
  let kbId: string;
  let docId: string;
  let writeOnly: string;
  let readOnly: string;
  let other: TestBuyer;
  let otherKb: string;

  beforeAll(async () => {
    f = await startGatewayFixture();
    await f.addNode({ country: 'CA' });
    writeOnly = await createKey(f.server.app, f.buyer, ['write-only'], 'uploader');
    readOnly = await createKey(f.server.app, f.buyer, ['read-only'], 'reader');
    kbId = String((await f.api('POST', '/api/v1/knowledge-bases', { name: 'Shared notes' })).json.id);
    other = await signUp(f.server.app);
    otherKb = String((await f.api('POST', '/api/v1/knowledge-bases', { name: 'Private notes' }, other.apiKey)).json.id);
    await f.api(
      'POST',
      `/api/v1/knowledge-bases/${otherKb}/documents`,
      { name: 'secret.txt', text: 'The secret volcano password is magma lava eruption.' },
      other.apiKey,
    );
  });
  afterAll(() => f.close());

  it('lets a write-only key upload but not list, read, search, create, delete or ground a chat', async () => {
    const up = await f.api(
      'POST',
      `/api/v1/knowledge-bases/${kbId}/documents`,
      { name: 'volcanoes.txt', text: VOLCANO_FACTS.join('\n\n') },
      writeOnly,
    );
    expect(up.status).toBe(202);
    expect(up.json).toMatchObject({ name: 'volcanoes.txt', status: 'processing' });
    docId = String(up.json.id);
    const refused: [string, string, unknown?][] = [
      ['GET', '/api/v1/knowledge-bases'],
      ['GET', `/api/v1/knowledge-bases/${kbId}`],
      ['GET', `/api/v1/knowledge-bases/${kbId}/documents`],
      ['GET', `/api/v1/knowledge-bases/${kbId}/documents/${docId}`],
      ['POST', `/api/v1/knowledge-bases/${kbId}/search`, { query: 'lava' }],
      ['POST', '/api/v1/knowledge-bases', { name: 'new' }],
      ['DELETE', `/api/v1/knowledge-bases/${kbId}/documents/${docId}`],
      ['DELETE', `/api/v1/knowledge-bases/${kbId}`],
    ];
    for (const [method, path, body] of refused) {
      const res = await f.api(method, path, body, writeOnly);
      expect(`${method} ${path}: ${res.status} ${String(res.json.error)}`).toBe(
        `${method} ${path}: 403 insufficient_scope`,
      );
    }
    // Inference is allowed, but grounding would read the knowledge base's content.
    const chat = await f.api(
      'POST',
      '/v1/chat/completions',
      { model: 'tinyllama', messages: [{ role: 'user', content: 'lava?' }], knowledge_base: kbId },
      writeOnly,
    );
    expect(chat.status).toBe(403);
    expect(chat.json).toMatchObject({
      error: {
        code: 'insufficient_scope',
        type: 'permission_error',
        message: expect.stringContaining('knowledge_bases:read'),
      },
    });
    expect(
      (
        await f.api(
          'POST',
          '/v1/chat/completions',
          { model: 'tinyllama', messages: [{ role: 'user', content: 'hi' }] },
          writeOnly,
        )
      ).status,
    ).toBe(200);
  });

  it('lets a read-only key list, read and search but not upload, create or delete', async () => {
    await eventually(
      async () =>
        (await f.api('GET', `/api/v1/knowledge-bases/${kbId}/documents/${docId}`, undefined, readOnly)).json.status ===
        'ready',
      30_000,
    );
    expect((await f.api('GET', '/api/v1/knowledge-bases', undefined, readOnly)).json.total).toBe(1);
    expect(
      (await f.api('GET', `/api/v1/knowledge-bases/${kbId}/documents`, undefined, readOnly)).json.documents,
    ).toHaveLength(1);
    const search = await f.api(
      'POST',
      `/api/v1/knowledge-bases/${kbId}/search`,
      { query: 'lava volcano', top_k: 2 },
      readOnly,
    );
    expect(search.status).toBe(200);
    expect((search.json.results as Json[])[0]?.document_id).toBe(docId);
    for (const [method, path, body] of [
      ['POST', `/api/v1/knowledge-bases/${kbId}/documents`, { name: 'x.txt', text: 'x' }],
      ['POST', '/api/v1/knowledge-bases', { name: 'new' }],
      ['DELETE', `/api/v1/knowledge-bases/${kbId}/documents/${docId}`],
      ['DELETE', `/api/v1/knowledge-bases/${kbId}`],
    ] as const) {
      const res = await f.api(method, path, body, readOnly);
      expect(`${method} ${path}: ${res.status} ${String(res.json.error)}`).toBe(
        `${method} ${path}: 403 insufficient_scope`,
      );
    }
  });

  it("answers 404 for another organization's knowledge base and documents, on every route and in chat", async () => {
    const { json } = await f.api('GET', `/api/v1/knowledge-bases/${otherKb}/documents`, undefined, other.apiKey);
    const otherDoc = String((json.documents as Json[])[0]?.id);
    const attempts: [string, string, unknown?][] = [
      ['GET', `/api/v1/knowledge-bases/${otherKb}`],
      ['DELETE', `/api/v1/knowledge-bases/${otherKb}`],
      ['GET', `/api/v1/knowledge-bases/${otherKb}/documents`],
      ['POST', `/api/v1/knowledge-bases/${otherKb}/documents`, { name: 'planted.txt', text: 'planted' }],
      ['GET', `/api/v1/knowledge-bases/${otherKb}/documents/${otherDoc}`],
      ['DELETE', `/api/v1/knowledge-bases/${otherKb}/documents/${otherDoc}`],
      ['POST', `/api/v1/knowledge-bases/${otherKb}/search`, { query: 'secret password' }],
      // Their document through our knowledge base id is not found either.
      ['GET', `/api/v1/knowledge-bases/${kbId}/documents/${otherDoc}`],
      ['DELETE', `/api/v1/knowledge-bases/${kbId}/documents/${otherDoc}`],
    ];
    for (const [method, path, body] of attempts) {
      const res = await f.api(method, path, body);
      expect(`${method} ${path}: ${res.status} ${String(res.json.error)}`).toBe(`${method} ${path}: 404 not_found`);
    }
    const chat = await f.api('POST', '/v1/chat/completions', {
      model: 'tinyllama',
      messages: [{ role: 'user', content: 'secret password?' }],
      knowledge_base: otherKb,
    });
    expect(chat.json).toEqual({
      error: {
        message: `knowledge base ${otherKb} not found`,
        type: 'invalid_request_error',
        param: null,
        code: 'not_found',
      },
    });
    expect(((await f.api('GET', '/api/v1/knowledge-bases')).json.knowledge_bases as Json[]).map((k) => k.id)).toEqual([
      kbId,
    ]);
    // Their data is intact.
    expect(
      (await f.api('GET', `/api/v1/knowledge-bases/${otherKb}/documents/${otherDoc}`, undefined, other.apiKey)).status,
    ).toBe(200);
    expect(
      (
        (await f.api('GET', `/api/v1/knowledge-bases/${otherKb}/documents`, undefined, other.apiKey)).json
          .documents as Json[]
      ).map((d) => d.name),
    ).toEqual(['secret.txt']);
  });

  it('works with a session token like a buyer key', async () => {
    const res = await f.api('GET', `/api/v1/knowledge-bases/${kbId}`, undefined, f.buyer.token);
    expect(res.status).toBe(200);
  });
});

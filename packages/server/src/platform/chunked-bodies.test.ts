import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  bearer,
  createKey,
  createTestNode,
  sendChunked,
  signUp,
  startTestServer,
  type RawAnswer,
  type TestBuyer,
} from '../../test/harness.js';
import { MAX_AUDIO_BYTES } from '../modules/gateway/audio.js';
import { presignObjectUrl } from './objects/presign.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/**
 * Issue 40, point 1: every route that takes a body gets a chunked body past its limit, its first
 * chunk sent at once with the head, in each content type the route reads (from /openapi.json) and
 * in JSON and raw bytes. Each must answer a 4xx (413 where a size limit applies) and the server
 * must keep answering: a stream's `error` without a listener ends the process (and the test run).
 * The routes come from the app's own table, so a new one is covered without editing this file.
 */

const BODY_LIMIT = 1024;
const KB_MAX_DOCUMENT_BYTES = 2048;
const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
const sha = (b: Buffer) => createHash('sha256').update(b).digest('hex');

/** A multipart form whose one file part is `bytes` bytes long, left open (no closing boundary). */
function openForm(bytes: number): { contentType: string; chunk: Buffer } {
  const boundary = 'svcchunkedlimit';
  return {
    contentType: `multipart/form-data; boundary=${boundary}`,
    chunk: Buffer.concat([
      Buffer.from(
        `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`,
      ),
      Buffer.alloc(bytes, 0x61),
    ]),
  };
}

describe('chunked bodies past their limit, to every route that takes a body', () => {
  let server: Awaited<ReturnType<typeof startTestServer>>;
  let buyer: TestBuyer;
  /** Real ids and headers for the routes that stream their body in the handler, so it is reached. */
  const fixtures = new Map<string, { path: string; headers: Record<string, string>; limit: number }>();

  beforeAll(async () => {
    server = await startTestServer({
      env: {
        SVC_LOG_LEVEL: 'warn',
        SVC_BODY_LIMIT_BYTES: String(BODY_LIMIT),
        SVC_KB_MAX_DOCUMENT_BYTES: String(KB_MAX_DOCUMENT_BYTES),
        SVC_RATE_LIMIT_BURST: '100000',
        SVC_ORG_RATE_LIMIT_BURST: '100000',
        SVC_ANON_RATE_LIMIT_BURST: '100000',
      },
    });
    const app = server.app;
    buyer = await signUp(app);
    await createTestNode(app, await createKey(app, buyer, ['operator']));
    const api = async (url: string, payload: Json) =>
      (await app.inject({ method: 'POST', url, headers: bearer(buyer.token), payload })).json() as Json;
    // A capture set of two 4-byte files: a tus upload made for one (Upload-Length 4), the other
    // left for an upload created with its bytes (tus's creation-with-upload).
    const site = await api('/api/v1/sites', { name: 'Limits' });
    const epoch = await api(`/api/v1/sites/${String(site.id)}/epochs`, { label: 'e1' });
    const file = Buffer.from('abcd');
    const set = await api('/api/v1/capture-sets', {
      site_epoch_id: epoch.id,
      manifest: {
        version: '1',
        files: ['a.bin', 'b.bin'].map((path) => ({ path, bytes: file.length, sha256: sha(file) })),
      },
    });
    const setId = String(set.capture_set.id);
    const tus = { ...bearer(buyer.token), 'tus-resumable': '1.0.0' };
    const creation = (path: string) => ({
      ...tus,
      'upload-length': '4',
      'upload-metadata': `path ${Buffer.from(path).toString('base64')}`,
    });
    const made = await app.inject({
      method: 'POST',
      url: `/api/v1/capture-sets/${setId}/uploads`,
      headers: creation('a.bin'),
    });
    expect(made.statusCode).toBe(201);
    fixtures.set('POST /api/v1/capture-sets/:id/uploads', {
      path: `/api/v1/capture-sets/${setId}/uploads`,
      headers: { ...creation('b.bin'), 'content-type': 'application/offset+octet-stream' },
      limit: 4,
    });
    fixtures.set('PATCH /api/v1/capture-sets/:id/uploads/:upload_id', {
      path: new URL(String(made.headers.location), 'http://x').pathname,
      headers: { ...tus, 'upload-offset': '0', 'content-type': 'application/offset+octet-stream' },
      limit: 4,
    });
    // A knowledge base, for its multipart document upload.
    const kb = await api('/api/v1/knowledge-bases', { name: 'Limits' });
    fixtures.set('POST /api/v1/knowledge-bases/:id/documents', {
      path: `/api/v1/knowledge-bases/${String(kb.id)}/documents`,
      headers: { 'content-type': 'multipart/form-data' },
      limit: KB_MAX_DOCUMENT_BYTES,
    });
    const put = new URL(
      presignObjectUrl(server.ctx, { method: 'PUT', key: 'capture-outputs/limits/out', ttlSeconds: 600, maxBytes: 1 }),
    );
    fixtures.set('PUT /api/v1/objects/:key', {
      path: `${put.pathname}${put.search}`,
      headers: { 'content-type': 'application/octet-stream' },
      limit: 1,
    });
  });
  afterAll(() => server?.stop());

  it('answers each with a 4xx (413 past a limit) and stays up', async () => {
    const doc = (await (await fetch(`${server.url}/openapi.json`)).json()) as Json;
    const routes = server.app.routeTable.filter((r) => BODY_METHODS.has(r.method));
    expect(routes.length).toBeGreaterThan(50);
    const answers: { route: string; type: string; status: number; limited: boolean }[] = [];
    for (const route of routes) {
      const name = `${route.method} ${route.url}`;
      const fixture = fixtures.get(name);
      const openapiPath = route.url.replace(/:(\w+)/g, '{$1}');
      const declared = Object.keys(
        (doc.paths?.[openapiPath]?.[route.method.toLowerCase()]?.requestBody?.content ?? {}) as Json,
      );
      const types = new Set(['application/json', 'application/octet-stream', ...declared]);
      if (fixture?.headers['content-type']) types.add(fixture.headers['content-type']);
      for (const type of types) {
        const multipartLimit = route.url.startsWith('/api/v1/knowledge-bases')
          ? KB_MAX_DOCUMENT_BYTES
          : MAX_AUDIO_BYTES;
        // Where the limit is known: the fixture's, a multipart file's, or the body parser's.
        const limit =
          fixture && type === fixture.headers['content-type']
            ? fixture.limit
            : type === 'multipart/form-data'
              ? multipartLimit
              : (route.bodyLimit ?? BODY_LIMIT);
        // A form parser holds back a boundary's length of a file's bytes, so a form goes 1 KiB past.
        const form = type === 'multipart/form-data' ? openForm(limit + 1024) : undefined;
        const res: RawAnswer = await sendChunked(server.url, {
          method: route.method,
          path: fixture?.path ?? route.url.replace(/:(\w+)/g, 'x'),
          headers: {
            ...(route.auth && !('public' in route.auth) && !('node' in route.auth) ? bearer(buyer.token) : {}),
            ...(fixture && type === fixture.headers['content-type'] ? fixture.headers : {}),
            'content-type': form?.contentType ?? type,
          },
          firstChunk: form?.chunk ?? Buffer.alloc(limit + 1, 0x7b),
        });
        answers.push({ route: name, type, status: res.status, limited: res.status === 413 });
        expect(res.status, `${name} (${type}): ${res.body.slice(0, 200)}`).toBeGreaterThanOrEqual(400);
        expect(res.status, `${name} (${type}): ${res.body.slice(0, 200)}`).toBeLessThan(500);
      }
    }
    // Every JSON body past the parser's limit is a 413, whatever the route; so is every streamed one.
    const json = answers.filter((a) => a.type === 'application/json');
    expect(json.filter((a) => !a.limited && !/^(GET|HEAD) /.test(a.route))).toEqual([]);
    const streamed = [...fixtures.keys()].map((route) =>
      answers.find((a) => a.route === route && a.type === fixtures.get(route)?.headers['content-type']),
    );
    expect(streamed.map((a) => [a?.route, a?.status])).toEqual([...fixtures.keys()].map((route) => [route, 413]));
    const forms = answers.filter((a) => a.type === 'multipart/form-data');
    expect(forms.map((a) => [a.route, a.status])).toEqual(forms.map((a) => [a.route, 413]));
    expect(forms.length).toBeGreaterThanOrEqual(2);
    const health = await fetch(`${server.url}/api/v1/health`);
    expect(health.status).toBe(200);
  }, 120_000);
});

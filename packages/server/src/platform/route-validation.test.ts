import { createHash } from 'node:crypto';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, signUp, type TestApp, type TestBuyer } from '../../test/harness.js';
import { createPayoutTestApp, localPage, onboardLocally } from '../../test/payout-account.js';
import { presignObjectUrl } from './objects/presign.js';
import { createRouteValidation } from './route-validation.js';

const N = { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] };

/** A bare Fastify app with svc's compiler set as `app.ts` sets it. */
function bareApp(): FastifyInstance {
  const validation = createRouteValidation();
  const app = Fastify({ schemaController: { compilersFactory: { buildValidator: validation.buildValidator } } });
  validation.install(app);
  return app;
}

describe("svc's compiler, in every plugin", () => {
  it('validates the routes of a plugin registered before the app adds a shared schema, without coercion', async () => {
    const app = bareApp();
    await app.register(async (scope) => {
      scope.post('/in-plugin', { schema: { body: N } }, async (request) => request.body);
    });
    // Reaches the plugin's context too, which then builds its compiler again (Fastify's default
    // Ajv, coercing "12" to 12, when svc's was set with setValidatorCompiler).
    app.addSchema({ $id: 'Shared', type: 'object' });
    await app.ready();
    const post = (payload: unknown) =>
      app.inject({ method: 'POST', url: '/in-plugin', payload: payload as Record<string, unknown> });
    expect((await post({ n: '12' })).statusCode).toBe(400);
    expect((await post({ n: 12 })).json()).toEqual({ n: 12 });
    expect(app.validatedParts).toEqual([{ method: 'POST', url: '/in-plugin', part: 'body', svc: true }]);
    await app.close();
  });

  it("refuses to start when a route's schema goes through another compiler", async () => {
    const own = bareApp();
    await own.register(async (scope) => {
      scope.setValidatorCompiler(() => () => true);
      scope.get('/drift/:n', { schema: { params: N } }, async () => 'x');
    });
    await expect(own.ready()).rejects.toThrow(
      "route schemas validated outside svc's compiler (platform/route-validation.ts): GET /drift/:n params, HEAD /drift/:n params",
    );
    const perRoute = bareApp();
    perRoute.post('/per-route', { schema: { body: N }, validatorCompiler: () => () => true }, async () => 'x');
    await expect(perRoute.ready()).rejects.toThrow(/: POST \/per-route body$/);
  });

  it('leaves a multipart form to its handler and still validates JSON where the route takes it', async () => {
    const app = bareApp();
    // A stand-in for @fastify/multipart: the body stays in the stream.
    app.addContentTypeParser('multipart/form-data', (_request, _payload, done) => done(null));
    const form = { 'content-type': 'multipart/form-data; boundary=x' };
    for (const consumes of [['multipart/form-data'], ['application/json', 'multipart/form-data']])
      app.post(`/${consumes.length}`, { schema: { consumes, body: N } }, async () => 'read');
    await app.ready();
    const send = (url: string, payload: string, headers: Record<string, string>) =>
      app.inject({ method: 'POST', url, payload, headers });
    expect((await send('/1', '--x--', form)).body).toBe('read');
    expect((await send('/2', '--x--', form)).body).toBe('read');
    expect((await send('/2', '{"n":"12"}', { 'content-type': 'application/json' })).statusCode).toBe(400);
    expect((await send('/2', '{"n":12}', { 'content-type': 'application/json' })).body).toBe('read');
    // A form-only route's handler answers anything else itself (the gateway's 415).
    expect((await send('/1', '{"n":"12"}', { 'content-type': 'application/json' })).body).toBe('read');
    await app.close();
  });
});

describe('the app: every route validated by svc, in the error shape', () => {
  let t: TestApp;
  let buyer: TestBuyer;
  beforeAll(async () => {
    ({ t } = await createPayoutTestApp());
    buyer = await signUp(t.app);
  });
  afterAll(() => t?.close());

  const invalid = (part: string, details: { path: string; message: string }[]) => ({
    code: 400,
    error: 'invalid_request',
    message: `invalid ${part}: ${details[0]?.path} ${details[0]?.message}`,
    details,
  });

  it('walks every route with a schema: each validated part compiled by svc', () => {
    const parts = t.app.validatedParts;
    expect(parts.filter((p) => !p.svc)).toEqual([]);
    const routes = new Set(parts.map((p) => `${p.method} ${p.url}`));
    expect(routes.size).toBeGreaterThan(100);
    for (const route of [
      'POST /pay/local/:page/:id',
      'POST /api/v1/capture-sets/:id/uploads',
      'PATCH /api/v1/capture-sets/:id/uploads/:upload_id',
      'HEAD /api/v1/capture-sets/:id/uploads/:upload_id',
      'GET /api/v1/objects/:key',
      'PUT /api/v1/objects/:key',
      'POST /v1/audio/transcriptions',
      'POST /api/v1/knowledge-bases/:id/documents',
    ])
      expect(routes).toContain(route);
  });

  it('/pay/local/:page/:id: a wrong-typed action is a 400; the form still onboards', async () => {
    const res = await t.app.inject({ method: 'POST', url: '/pay/local/checkout/x', payload: { action: 12 } });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual(invalid('body', [{ path: '/action', message: 'must be string' }]));
    const page = await t.app.inject({ method: 'POST', url: '/pay/local/refund/x', payload: { action: 'pay' } });
    expect(page.json()).toEqual(
      invalid('path', [{ path: '/page', message: 'must be one of "onboarding", "checkout"' }]),
    );
    const { accountId } = await onboardLocally(t.app, await signUp(t.app));
    expect(accountId).toMatch(/^acct_local_/);
  });

  it('/api/v1/capture-sets/:id/uploads: a bad set id is a 400; a tus upload is still created', async () => {
    const res = await t.app.inject({
      method: 'PATCH',
      url: '/api/v1/capture-sets/set_1/uploads/up_1',
      headers: { ...bearer(buyer.apiKey), 'tus-resumable': '1.0.0' },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual(invalid('path', [{ path: '/id', message: 'must match pattern "^cs_[0-9a-z]{26}$"' }]));
    const api = async (url: string, payload: Record<string, unknown>) =>
      (await t.app.inject({ method: 'POST', url, headers: bearer(buyer.apiKey), payload })).json() as { id: string };
    const site = await api('/api/v1/sites', { name: 'Tower' });
    const epoch = await api(`/api/v1/sites/${site.id}/epochs`, { label: 'e1' });
    const sha256 = createHash('sha256').update('abc').digest('hex');
    const set = (await api('/api/v1/capture-sets', {
      site_epoch_id: epoch.id,
      manifest: { version: '1', files: [{ path: 'a.txt', bytes: 3, sha256 }] },
    })) as unknown as { capture_set: { id: string } };
    const created = await t.app.inject({
      method: 'POST',
      url: `/api/v1/capture-sets/${set.capture_set.id}/uploads`,
      headers: {
        ...bearer(buyer.apiKey),
        'tus-resumable': '1.0.0',
        'upload-length': '3',
        'upload-metadata': `path ${Buffer.from('a.txt').toString('base64')}`,
      },
    });
    expect(created.statusCode, created.body).toBe(201);
    expect(created.headers.location).toContain(`/api/v1/capture-sets/${set.capture_set.id}/uploads/`);
  });

  it('/api/v1/objects/:key: a bad query is a 400 naming each field; a presigned PUT and GET still work', async () => {
    const res = await t.app.inject({
      method: 'GET',
      url: `/api/v1/objects/a.bin?expires=${'1'.repeat(21)}&signature=${'s'.repeat(129)}`,
    });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual(
      invalid('query', [
        { path: '/expires', message: 'must NOT have more than 20 characters' },
        { path: '/signature', message: 'must NOT have more than 128 characters' },
      ]),
    );
    const at = (method: 'GET' | 'PUT') =>
      localPage(presignObjectUrl(t.ctx, { method, key: 'outputs/v/a.bin', ttlSeconds: 60, maxBytes: 16 }));
    const put = await t.app.inject({ method: 'PUT', url: at('PUT'), payload: Buffer.from('object bytes') });
    expect(put.json()).toEqual({ key: 'outputs/v/a.bin', bytes: 12 });
    const get = await t.app.inject({ method: 'GET', url: at('GET') });
    expect([get.statusCode, get.body]).toEqual([200, 'object bytes']);
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createKey, createTestApp, signUp, type TestApp, type TestBuyer } from '../../../test/harness.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const H = 'b'.repeat(64);

describe('capture sets: bad input, scopes and tenancy', () => {
  let t: TestApp;
  let alice: TestBuyer;
  let bob: TestBuyer;
  let siteId: string;
  let epochId: string;
  let setId: string;
  const api = async (method: string, url: string, payload?: unknown, key = alice.apiKey) => {
    const res = await t.app.inject({
      method: method as 'GET',
      url,
      headers: bearer(key),
      ...(payload === undefined ? {} : { payload: payload as Json }),
    });
    return { status: res.statusCode, json: res.json() as Json };
  };

  beforeAll(async () => {
    t = await createTestApp();
    alice = await signUp(t.app);
    bob = await signUp(t.app);
    siteId = String((await api('POST', '/api/v1/sites', { name: 'Mine' })).json.id);
    epochId = String((await api('POST', `/api/v1/sites/${siteId}/epochs`, { label: 'one' })).json.id);
    setId = String(
      (
        await api('POST', '/api/v1/capture-sets', {
          site_epoch_id: epochId,
          manifest: { files: [{ path: 'a.jpg', bytes: 1, sha256: H }] },
        })
      ).json.capture_set.id,
    );
  });
  afterAll(() => t.close());

  it('refuses manifests with bad paths, naming the file and the rule', async () => {
    const cases: [string, string][] = [
      ['../etc/passwd', '/manifest/files/0/path "../etc/passwd" must not contain a ".." segment'],
      ['/abs.jpg', '/manifest/files/0/path "/abs.jpg" must be relative (no leading "/")'],
      ['dir/CON.txt', '/manifest/files/0/path "dir/CON.txt" segment "CON.txt" is a reserved device name'],
      ['a\u0001b', '/manifest/files/0/path "a\\u0001b" must not contain control characters'],
      ['a//b', '/manifest/files/0/path "a//b" must be normalised (no empty segment, no trailing "/")'],
    ];
    for (const [path, message] of cases) {
      const res = await api('POST', '/api/v1/capture-sets', {
        site_epoch_id: epochId,
        manifest: { version: '1', files: [{ path, bytes: 1, sha256: H }] },
      });
      expect(res.status).toBe(400);
      expect(res.json).toMatchObject({
        code: 400,
        error: 'invalid_request',
        message: `the manifest is invalid: ${message}`,
      });
    }
    const dup = await api('POST', '/api/v1/capture-sets', {
      site_epoch_id: epochId,
      manifest: {
        files: [
          { path: 'x.jpg', bytes: 1, sha256: H },
          { path: 'X.JPG', bytes: 1, sha256: H },
        ],
      },
    });
    expect(dup.json.details).toEqual([
      { path: '/manifest/files/1/path', message: '"X.JPG" repeats files/0 (paths must be unique, ignoring case)' },
    ]);
  });

  it('refuses totals that disagree with the manifest and a set created in another state', async () => {
    const files = [{ path: 'a.jpg', bytes: 10, sha256: H }];
    expect(
      (await api('POST', '/api/v1/capture-sets', { site_epoch_id: epochId, manifest: { files }, raw_bytes: 11 })).json
        .message,
    ).toBe("raw_bytes is 11 but the manifest's files add up to 10 bytes");
    expect(
      (await api('POST', '/api/v1/capture-sets', { site_epoch_id: epochId, manifest: { files }, total_files: 2 })).json
        .message,
    ).toBe('total_files is 2 but the manifest lists 1');
    const ready = await api('POST', '/api/v1/capture-sets', {
      site_epoch_id: epochId,
      manifest: { files },
      status: 'ready',
    });
    expect(ready).toMatchObject({
      status: 409,
      json: { error: 'conflict', message: 'a new capture set starts in pending_upload; it cannot be created as ready' },
    });
    expect(
      (await api('POST', '/api/v1/capture-sets', { site_epoch_id: epochId, manifest: { files }, status: 'bogus' }))
        .status,
    ).toBe(400);
    expect((await api('POST', '/api/v1/capture-sets', { site_epoch_id: epochId, manifest: 'nope' })).status).toBe(400);
  });

  it('answers 409 naming both states for a transition the table does not allow', async () => {
    const res = await api('POST', `/api/v1/capture-sets/${setId}/complete`, {});
    expect(res).toMatchObject({
      status: 409,
      json: {
        error: 'conflict',
        message:
          'a capture set cannot move from pending_upload to ready (from pending_upload it can move to uploading or failed)',
      },
    });
    const verified = await api('POST', `/api/v1/capture-sets/${setId}/complete`, { status: 'verified' });
    expect(verified.json.message).toBe(
      'a capture set cannot move from pending_upload to verified (from pending_upload it can move to uploading or failed)',
    );
    const other = await api('POST', `/api/v1/capture-sets/${setId}/complete`, {
      manifest: { files: [{ path: 'b.jpg', bytes: 1, sha256: H }] },
    });
    expect(other).toMatchObject({
      status: 409,
      json: { message: 'the manifest sent with complete differs from the one the capture set was created with' },
    });
  });

  it('refuses bad site and epoch fields', async () => {
    expect((await api('POST', '/api/v1/sites', { name: '' })).status).toBe(400);
    expect((await api('POST', '/api/v1/sites', { name: 'x', latitude: 91 })).status).toBe(400);
    expect((await api('POST', '/api/v1/sites', { name: 'x', country: 'Canada' })).status).toBe(400);
    expect((await api('PATCH', `/api/v1/sites/${siteId}`, {})).status).toBe(400);
    expect((await api('PATCH', `/api/v1/sites/${siteId}`, { name: null })).status).toBe(400);
    const backwards = await api('POST', `/api/v1/sites/${siteId}/epochs`, {
      label: 'x',
      captured_from: '2026-02-01T00:00:00Z',
      captured_to: '2026-01-01T00:00:00Z',
    });
    expect(backwards).toMatchObject({ status: 400, json: { message: 'captured_from must not be after captured_to' } });
    expect((await api('GET', '/api/v1/sites/site_nope')).status).toBe(400);
  });

  it("answers 404 for another organization's site, epoch and capture set, on every path", async () => {
    const paths: [string, string, unknown?][] = [
      ['GET', `/api/v1/sites/${siteId}`],
      ['PATCH', `/api/v1/sites/${siteId}`, { name: 'mine now' }],
      ['DELETE', `/api/v1/sites/${siteId}`],
      ['GET', `/api/v1/sites/${siteId}/epochs`],
      ['POST', `/api/v1/sites/${siteId}/epochs`, { label: 'x' }],
      ['GET', `/api/v1/epochs/${epochId}`],
      ['GET', `/api/v1/epochs/${epochId}/capture-sets`],
      ['POST', '/api/v1/capture-sets', { site_epoch_id: epochId, manifest: { files: [] } }],
      ['GET', `/api/v1/capture-sets/${setId}`],
      ['POST', `/api/v1/capture-sets/${setId}/complete`, {}],
      ['GET', `/api/v1/jobs/${setId}/evidence`],
    ];
    for (const [method, path, body] of paths) {
      const res = await api(method, path, body, bob.apiKey);
      expect(`${method} ${path}: ${res.status}`).toBe(`${method} ${path}: 404`);
    }
    expect((await api('GET', '/api/v1/sites', undefined, bob.apiKey)).json.sites).toEqual([]);
  });

  it('lets a read-only key read but not write, and a write-only key do neither', async () => {
    const readOnly = await createKey(t.app, alice, ['read-only']);
    const writeOnly = await createKey(t.app, alice, ['write-only']);
    expect((await api('GET', `/api/v1/capture-sets/${setId}`, undefined, readOnly)).status).toBe(200);
    expect((await api('GET', `/api/v1/epochs/${epochId}/capture-sets`, undefined, readOnly)).status).toBe(200);
    for (const [method, path, body] of [
      ['POST', '/api/v1/sites', { name: 'x' }],
      ['PATCH', `/api/v1/sites/${siteId}`, { name: 'x' }],
      ['DELETE', `/api/v1/sites/${siteId}`],
      ['POST', `/api/v1/sites/${siteId}/epochs`, { label: 'x' }],
      ['POST', '/api/v1/capture-sets', { site_epoch_id: epochId }],
      ['POST', `/api/v1/capture-sets/${setId}/complete`, {}],
    ] as [string, string, unknown?][]) {
      const res = await api(method, path, body, readOnly);
      expect(`${method} ${path}: ${res.status} ${String(res.json.error)}`).toBe(
        `${method} ${path}: 403 insufficient_scope`,
      );
    }
    expect((await api('GET', `/api/v1/capture-sets/${setId}`, undefined, writeOnly)).status).toBe(403);
    const scoped = await createKey(t.app, alice, ['capture_sets:read']);
    expect((await api('GET', `/api/v1/sites/${siteId}`, undefined, scoped)).status).toBe(200);
    expect((await api('POST', '/api/v1/sites', { name: 'x' }, scoped)).status).toBe(403);
  });
});

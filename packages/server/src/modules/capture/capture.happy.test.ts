import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createTestApp, signUp, type TestApp, type TestBuyer } from '../../../test/harness.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const sha = (s: string) => createHash('sha256').update(s).digest('hex');

describe('sites, epochs and capture sets', () => {
  let t: TestApp;
  let buyer: TestBuyer;
  const api = async (method: string, url: string, payload?: unknown, key = buyer.apiKey) => {
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
    buyer = await signUp(t.app);
  });
  afterAll(() => t.close());

  it('creates, reads, lists, changes and deletes a site', async () => {
    const created = await api('POST', '/api/v1/sites', {
      name: ' Bridge 7 ',
      country: 'CA',
      latitude: 45.5,
      longitude: -73.6,
      description: 'north span',
    });
    expect(created.status).toBe(201);
    expect(created.json).toMatchObject({
      name: 'Bridge 7',
      country: 'CA',
      latitude: 45.5,
      longitude: -73.6,
      description: 'north span',
    });
    expect(created.json.id).toMatch(/^site_[0-9a-z]{26}$/);
    const id = String(created.json.id);
    expect((await api('GET', `/api/v1/sites/${id}`)).json).toEqual(created.json);
    const patched = await api('PATCH', `/api/v1/sites/${id}`, { description: null, latitude: 45.51 });
    expect(patched.json).toMatchObject({ id, name: 'Bridge 7', description: null, latitude: 45.51, longitude: -73.6 });
    expect(Date.parse(String(patched.json.updated_at))).toBeGreaterThanOrEqual(
      Date.parse(String(created.json.updated_at)),
    );
    const list = await api('GET', '/api/v1/sites');
    expect(list.json.sites.map((s: Json) => s.id)).toContain(id);
    expect(list.json.total).toBeGreaterThanOrEqual(1);
    expect(await api('DELETE', `/api/v1/sites/${id}`)).toEqual({ status: 200, json: { id, deleted: true } });
    expect((await api('GET', `/api/v1/sites/${id}`)).status).toBe(404);
  });

  it('creates epochs of a site and lists them with the site', async () => {
    const site = (await api('POST', '/api/v1/sites', { name: 'Quarry' })).json;
    const e1 = await api('POST', `/api/v1/sites/${site.id}/epochs`, {
      label: '2026-Q3',
      captured_from: '2026-07-01T00:00:00Z',
      captured_to: '2026-09-30T00:00:00Z',
    });
    expect(e1.status).toBe(201);
    expect(e1.json).toMatchObject({
      site_id: site.id,
      label: '2026-Q3',
      captured_from: '2026-07-01T00:00:00.000Z',
      captured_to: '2026-09-30T00:00:00.000Z',
    });
    const e2 = await api('POST', `/api/v1/sites/${site.id}/epochs`, { label: '2026-Q4' });
    expect(e2.json).toMatchObject({ captured_from: null, captured_to: null });
    const list = await api('GET', `/api/v1/sites/${site.id}/epochs`);
    expect(list.json.epochs.map((e: Json) => e.id)).toEqual([e2.json.id, e1.json.id]);
    expect(list.json.site.id).toBe(site.id);
    expect((await api('GET', `/api/v1/epochs/${e1.json.id}`)).json).toEqual(e1.json);
  });

  it('creates a capture set from its manifest, with every spec field, and lists it under its epoch', async () => {
    const site = (await api('POST', '/api/v1/sites', { name: 'Dam', country: 'NO' })).json;
    const epoch = (await api('POST', `/api/v1/sites/${site.id}/epochs`, { label: 'spring' })).json;
    const manifest = {
      version: '2',
      files: [
        { path: 'img/0001.jpg', bytes: 5, sha256: sha('hello'), content_type: 'image/jpeg' },
        { path: 'scan.laz', bytes: 3, sha256: sha('abc').toUpperCase() },
      ],
    };
    const res = await api('POST', '/api/v1/capture-sets', {
      site_epoch_id: epoch.id,
      manifest,
      source_type: 'drone',
      source_partner_id: 'partner-9',
      accuracy_profile: 'survey',
      ingest_mode: 'upload',
      raw_bytes: 8,
      total_files: 2,
      status: 'pending_upload',
    });
    expect(res.status).toBe(201);
    const cs = res.json.capture_set;
    expect(cs).toMatchObject({
      site_epoch_id: epoch.id,
      source_type: 'drone',
      source_partner_id: 'partner-9',
      accuracy_profile: 'survey',
      ingest_mode: 'upload',
      manifest_version: '2',
      status: 'pending_upload',
      raw_bytes: 8,
      total_files: 2,
      completed_at: null,
      failure_reason: null,
    });
    expect(cs.id).toMatch(/^cs_[0-9a-z]{26}$/);
    expect(JSON.parse(String(cs.manifest_json))).toEqual({
      version: '2',
      files: [
        { path: 'img/0001.jpg', bytes: 5, sha256: sha('hello'), content_type: 'image/jpeg' },
        { path: 'scan.laz', bytes: 3, sha256: sha('abc'), content_type: 'application/octet-stream' },
      ],
    });
    expect(res.json.epoch.id).toBe(epoch.id);
    expect(res.json.site).toMatchObject({ id: site.id, name: 'Dam' });
    expect(res.json.files).toEqual([
      {
        path: 'img/0001.jpg',
        bytes: 5,
        sha256: sha('hello'),
        content_type: 'image/jpeg',
        bytes_received: 0,
        verification: 'pending',
        verified_at: null,
      },
      {
        path: 'scan.laz',
        bytes: 3,
        sha256: sha('abc'),
        content_type: 'application/octet-stream',
        bytes_received: 0,
        verification: 'pending',
        verified_at: null,
      },
    ]);
    expect((await api('GET', `/api/v1/capture-sets/${cs.id}`)).json).toEqual(res.json);
    const list = await api('GET', `/api/v1/epochs/${epoch.id}/capture-sets`);
    expect(list.json.capture_sets.map((c: Json) => c.id)).toEqual([cs.id]);
    expect(list.json.epoch.id).toBe(epoch.id);
    expect(list.json.site.id).toBe(site.id);

    // Its evidence run starts with the creation.
    const graph = await api('GET', `/api/v1/jobs/${cs.id}/evidence`);
    expect(graph.status).toBe(200);
    expect(graph.json.events.map((e: Json) => e.event_type)).toEqual(['capture_set.created']);
    expect(graph.json.events[0].metadata).toMatchObject({
      total_files: 2,
      raw_bytes: 8,
      site_id: site.id,
      epoch_id: epoch.id,
    });

    // A site with capture sets stays.
    const del = await api('DELETE', `/api/v1/sites/${site.id}`);
    expect(del.status).toBe(409);
    expect(del.json.message).toBe(`site ${site.id} has 1 capture set; a site with capture sets cannot be deleted`);
  });

  it('abandons a set with complete {status: failed}, closing its evidence run, and refuses moves out of failed', async () => {
    const site = (await api('POST', '/api/v1/sites', { name: 'Pier' })).json;
    const epoch = (await api('POST', `/api/v1/sites/${site.id}/epochs`, { label: 'x' })).json;
    const cs = (
      await api('POST', '/api/v1/capture-sets', {
        site_epoch_id: epoch.id,
        manifest: { version: '1', files: [{ path: 'a', bytes: 1, sha256: sha('a') }] },
      })
    ).json.capture_set;
    const failed = await api('POST', `/api/v1/capture-sets/${cs.id}/complete`, { status: 'failed' });
    expect(failed.status).toBe(200);
    expect(failed.json.capture_set).toMatchObject({
      status: 'failed',
      failure_reason: 'abandoned by the client (complete with status failed)',
    });
    const again = await api('POST', `/api/v1/capture-sets/${cs.id}/complete`, {});
    expect(again).toMatchObject({
      status: 409,
      json: { error: 'conflict', message: 'the capture set is failed, a final state: it cannot move to ready' },
    });
    const graph = await api('GET', `/api/v1/jobs/${cs.id}/evidence`);
    expect(graph.json.events.map((e: Json) => e.event_type)).toEqual(['capture_set.created', 'capture_set.failed']);
    expect(graph.json.run.status).toBe('completed');
  });
});

import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../../../test/harness.js';
import { isDashboardPath } from './routes.js';

const HTML = { accept: 'text/html,application/xhtml+xml' };

describe('serving the dashboard', () => {
  let dir: string;
  let t: TestApp;
  const script = `console.log(${JSON.stringify('x'.repeat(4000))});`;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'svc-dashboard-'));
    mkdirSync(join(dir, 'assets'));
    writeFileSync(
      join(dir, 'index.html'),
      '<!doctype html><title>SVC</title><div id="app"></div><script type="module" src="/assets/index-abc123.js"></script>',
    );
    writeFileSync(join(dir, 'assets', 'index-abc123.js'), script);
    t = await createTestApp({ env: { SVC_DASHBOARD_DIR: dir } });
  });
  afterAll(async () => {
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves index.html at / without a key, with a strict content security policy', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(res.body).toContain('<div id="app">');
    expect(res.headers['content-security-policy']).toContain("script-src 'self'");
    expect(res.headers['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(res.headers['referrer-policy']).toBe('no-referrer');
    expect(res.headers['cache-control']).toBe('no-cache');
  });

  it('serves hashed assets as immutable, gzipped when asked, and 304 on a matching etag', async () => {
    const plain = await t.app.inject({ method: 'GET', url: '/assets/index-abc123.js' });
    expect(plain.statusCode).toBe(200);
    expect(plain.body).toBe(script);
    expect(plain.headers['cache-control']).toContain('immutable');
    const gz = await t.app.inject({
      method: 'GET',
      url: '/assets/index-abc123.js',
      headers: { 'accept-encoding': 'gzip, br' },
    });
    expect(gz.headers['content-encoding']).toBe('gzip');
    expect(gunzipSync(gz.rawPayload).toString('utf8')).toBe(script);
    expect(gz.rawPayload.length).toBeLessThan(script.length / 4);
    const again = await t.app.inject({
      method: 'GET',
      url: '/assets/index-abc123.js',
      headers: { 'if-none-match': String(plain.headers.etag) },
    });
    expect(again.statusCode).toBe(304);
  });

  it('answers a missing asset with the JSON 404, never the page', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/assets/nope.js', headers: HTML });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toMatchObject({ code: 404, error: 'not_found' });
  });

  it('gives a browser the app for client-side pages (deep links, the invite link)', async () => {
    for (const url of ['/keys', '/jobs/job_00000000000000000000000000', '/invite?token=abc', '/organization/']) {
      const res = await t.app.inject({ method: 'GET', url, headers: HTML });
      expect(`${url}: ${res.statusCode}`).toBe(`${url}: 200`);
      expect(res.body).toContain('<div id="app">');
    }
  });

  it('never swallows API, gateway, docs or service paths, nor non-browser clients', async () => {
    for (const url of [
      '/api/v1/nope',
      '/v1/nope',
      '/docs/nope',
      '/openapi.json/x',
      '/metrics/x',
      '/mcp/x',
      '/healthz',
      '/.well-known/x',
    ]) {
      const res = await t.app.inject({ method: 'GET', url, headers: HTML });
      expect(`${url}: ${res.statusCode} ${res.headers['content-type']}`).toMatch(
        new RegExp(`^${url.replace(/[.?]/g, '\\$&')}: 404 application/json`),
      );
    }
    const curl = await t.app.inject({ method: 'GET', url: '/keys', headers: { accept: '*/*' } });
    expect(curl.statusCode).toBe(404);
    const post = await t.app.inject({ method: 'POST', url: '/keys', headers: HTML, payload: {} });
    expect(post.statusCode).toBe(404);
    const api = await t.app.inject({ method: 'GET', url: '/api/v1/health', headers: HTML });
    expect(api.json()).toMatchObject({ ok: true });
  });

  it('starts without a build, and / says how to build the dashboard', async () => {
    const bare = await createTestApp({ env: { SVC_DASHBOARD_DIR: join(dir, 'missing') } });
    try {
      const res = await bare.app.inject({ method: 'GET', url: '/' });
      expect(res.statusCode).toBe(503);
      expect(res.body).toContain('npm install');
      expect(res.body).toContain('npm run build -w @svc/dashboard');
      expect((await bare.app.inject({ method: 'GET', url: '/api/v1/health' })).statusCode).toBe(200);
    } finally {
      await bare.close();
    }
  });
});

describe('isDashboardPath', () => {
  it('takes page paths and refuses reserved and file-like ones', () => {
    expect(['/', '/keys', '/jobs/job_abc', '/invite?token=x', '/sla/'].map(isDashboardPath)).toEqual([
      true,
      true,
      true,
      true,
      true,
    ]);
    expect(
      ['/api/v1/x', '/v1/models', '/docs', '/assets/a.js', '/health', '/favicon.ico', '/a/../b', '/mcp'].map(
        isDashboardPath,
      ),
    ).toEqual(Array(8).fill(false));
  });
});

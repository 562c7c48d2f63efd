import SwaggerParser from '@apidevtools/swagger-parser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../../test/harness.js';

/** Routes deliberately left out of the document: the docs page's own assets and the dashboard's static files. */
// HTML pages, not API operations: the docs viewer, the dashboard, and the local payment provider's pages.
const UNDOCUMENTED = [/^\/docs(\/|$)/, /^\/$/, /^\/assets\//, /^\/pay\/local\//];

describe('the OpenAPI document', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

  it('is valid OpenAPI 3.0.3', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/openapi.json' });
    expect(res.statusCode).toBe(200);
    const doc = res.json();
    expect(doc.openapi).toBe('3.0.3');
    await expect(SwaggerParser.validate(structuredClone(doc))).resolves.toBeTruthy();
  });

  it('documents every registered route', async () => {
    const doc = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json() as {
      paths: Record<string, Record<string, unknown>>;
    };
    const registered = t.app.routeTable;
    const missing = registered
      .filter((r) => !UNDOCUMENTED.some((re) => re.test(r.url)) && r.method !== 'HEAD')
      // A wildcard (`/api/v1/log/tile/*`) is documented as `{*}`, as @fastify/swagger writes it.
      .filter(
        (r) => !doc.paths[r.url.replace(/:([A-Za-z_]+)/g, '{$1}').replace(/\*$/, '{*}')]?.[r.method.toLowerCase()],
      );
    expect(registered.length).toBeGreaterThan(5);
    expect(missing).toEqual([]);
  });

  it('gives every operation the error response shape and marks public routes as needing no key', async () => {
    const doc = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json();
    const health = doc.paths['/api/v1/health'].get;
    expect(health.security).toEqual([]);
    expect(health.responses['4XX'].content['application/json'].schema.$ref).toBe('#/components/schemas/ErrorResponse');
    expect(
      doc.components.schemas.ErrorResponse.properties.error.anyOf ??
        doc.components.schemas.ErrorResponse.properties.error.enum,
    ).toBeTruthy();
  });

  it('renders at /docs', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/docs/' });
    expect(res.statusCode).toBe(200);
    expect(res.body).toContain('swagger-ui');
  });
});

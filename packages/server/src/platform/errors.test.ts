import { Type } from '@sinclair/typebox';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../../test/harness.js';

describe('the one error shape', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp({
      extraRoutes(app) {
        app.post(
          '/__probe/echo',
          {
            config: { auth: { public: true } },
            schema: {
              hide: true,
              body: Type.Object({
                name: Type.String({ minLength: 1 }),
                count: Type.Integer({ minimum: 0 }),
                kind: Type.Optional(Type.Union([Type.Literal('a'), Type.Literal('b')])),
              }),
            },
          },
          async (request) => request.body,
        );
        app.get('/__probe/crash', { config: { auth: { public: true } }, schema: { hide: true } }, async () => {
          throw new Error('database password is hunter2 at /secret/path.ts:12');
        });
      },
    });
  });
  afterAll(() => t.close());

  it('answers an unknown route with 404 not_found', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/api/v1/nope?x=1' });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ code: 404, error: 'not_found', message: 'no route GET /api/v1/nope' });
  });

  it('answers malformed JSON with 400 invalid_request', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/__probe/echo',
      headers: { 'content-type': 'application/json' },
      payload: '{"name": "x",',
    });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: 400, error: 'invalid_request' });
    expect(res.json().message).toMatch(/malformed JSON/);
  });

  it('answers an oversized body with 413 payload_too_large', async () => {
    const big = JSON.stringify({ name: 'x'.repeat(1024 * 1024 + 10), count: 1 });
    const res = await t.app.inject({
      method: 'POST',
      url: '/__probe/echo',
      headers: { 'content-type': 'application/json' },
      payload: big,
    });
    expect(res.statusCode).toBe(413);
    expect(res.json()).toEqual({ code: 413, error: 'payload_too_large', message: 'request body is too large' });
  });

  it('answers a wrong content type with 415 unsupported_media_type', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/__probe/echo',
      headers: { 'content-type': 'text/csv' },
      payload: 'a,b',
    });
    expect(res.statusCode).toBe(415);
    expect(res.json()).toMatchObject({ code: 415, error: 'unsupported_media_type' });
  });

  it('answers validation failures with 400 and one detail per field, without coercing types', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/__probe/echo',
      payload: { name: '', count: '3', kind: 'c' },
    });
    expect(res.statusCode).toBe(400);
    const body = res.json();
    expect(body.error).toBe('invalid_request');
    const paths = body.details.map((d: { path: string }) => d.path);
    expect(paths).toEqual(expect.arrayContaining(['/name', '/count', '/kind']));
    expect(body.details.find((d: { path: string }) => d.path === '/kind').message).toContain('"a"');
  });

  it('names a missing required field by its path', async () => {
    const res = await t.app.inject({ method: 'POST', url: '/__probe/echo', payload: { count: 1 } });
    expect(res.statusCode).toBe(400);
    expect(res.json().details).toContainEqual({ path: '/name', message: "must have required property 'name'" });
  });

  it('hides an unexpected error behind 500 internal and logs it with its stack', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/__probe/crash' });
    expect(res.statusCode).toBe(500);
    expect(res.json()).toEqual({ code: 500, error: 'internal', message: 'internal server error' });
    expect(res.body).not.toContain('hunter2');
    expect(res.body).not.toContain('.ts');
    expect(t.logs.text()).toContain('hunter2');
  });

  it('returns X-Request-Id on every response, echoing a safe one the caller sent', async () => {
    const mine = await t.app.inject({
      method: 'GET',
      url: '/api/v1/health',
      headers: { 'x-request-id': 'trace-abc.123' },
    });
    expect(mine.headers['x-request-id']).toBe('trace-abc.123');
    const unsafe = await t.app.inject({
      method: 'GET',
      url: '/nope',
      headers: { 'x-request-id': 'bad id\nwith newline' },
    });
    expect(unsafe.headers['x-request-id']).toMatch(/^req_[0-9a-f]{32}$/);
    expect(t.logs.text()).toContain('"request_id":"trace-abc.123"');
  });
});

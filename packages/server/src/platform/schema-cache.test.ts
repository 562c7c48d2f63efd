import { SerializerSelector } from '@fastify/fast-json-stringify-compiler';
import Fastify from 'fastify';
import { describe, expect, it, vi } from 'vitest';
import { createTestApp } from '../../test/harness.js';
import { cachedSerializerFactory, cachedValidatorCompiler, compileSchemas } from './schema-cache.js';
import { createValidatorCompiler } from './validation.js';

const body = { type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] };

describe('compiled schemas shared by the apps of one process', () => {
  it('compiles a validator once per kind, HTTP part and schema text', () => {
    let compiled = 0;
    const inner = createValidatorCompiler();
    const compile = cachedValidatorCompiler('test-kind', (route) => {
      compiled += 1;
      return inner(route);
    });
    const route = { schema: body, method: 'POST', url: '/a', httpPart: 'body' };
    const first = compile(route);
    expect(first({ n: 1 })).toBe(true);
    // Another app, another route, an equal schema (a new object): the same compiled function.
    const again = compile({ ...route, url: '/b', schema: structuredClone(body) });
    expect(again).toBe(first);
    expect(again({ n: 2 })).toBe(true);
    expect(compiled).toBe(1);
    const query = compile({ ...route, httpPart: 'querystring' });
    const other = compile({ ...route, schema: { ...body, required: [] } });
    expect(query).not.toBe(first);
    expect(other).not.toBe(first);
    expect([query({ n: '1' }), other({})]).toEqual([true, true]);
    expect(compiled).toBe(3);
    expect(first({ n: 'one' })).toBe(false);
    expect(first.errors?.[0]).toMatchObject({ instancePath: '/n', keyword: 'type' });
  });

  it('compiles a validator when its route first validates, not when the app is built', async () => {
    let compiled = 0;
    const inner = createValidatorCompiler();
    // A schema no other test of this process has compiled.
    const field = `v${Date.now()}`;
    const schema = { body: { type: 'object', properties: { [field]: { type: 'integer' } }, required: [field] } };
    const app = Fastify();
    app.setValidatorCompiler(
      cachedValidatorCompiler('lazy', (route) => {
        compiled += 1;
        return inner(route);
      }),
    );
    app.post('/lazy', { schema }, async () => ({ ok: true }));
    await app.ready();
    expect(compiled).toBe(0);
    expect((await app.inject({ method: 'POST', url: '/lazy', payload: { [field]: 1 } })).statusCode).toBe(200);
    // Refused with the compiled validator's own errors.
    const refused = await app.inject({ method: 'POST', url: '/lazy', payload: { [field]: 'one' } });
    expect(refused.statusCode).toBe(400);
    expect(refused.json()).toMatchObject({ message: `body/${field} must be integer` });
    expect(compiled).toBe(1);
    await app.close();
  });

  it('compiles a response serializer once per schema and shared schemas, for every app', async () => {
    const schema = { response: { 200: { type: 'object', properties: { a: { type: 'string' } } } } };
    const build = async () => {
      const app = Fastify({ schemaController: { compilersFactory: { buildSerializer: cachedSerializerFactory() } } });
      app.get('/x', { schema }, async () => ({ a: 'kept', b: 'dropped' }));
      await app.ready();
      return app;
    };
    const one = await build();
    const two = await build();
    // Through Fastify, in both apps: the serializer writes only the declared field.
    for (const app of [one, two])
      expect((await app.inject({ method: 'GET', url: '/x' })).json()).toEqual({ a: 'kept' });
    // Another factory (another app), an equal schema on another route: the same compiled function.
    const factory = cachedSerializerFactory()(undefined, undefined);
    const route = { method: 'GET', url: '/x', httpStatus: '200', schema: schema.response[200] };
    const fn = factory(route);
    expect(cachedSerializerFactory()(undefined, undefined)({ ...route, url: '/y' })).toBe(fn);
    expect(factory({ ...route, schema: { type: 'object', properties: { b: { type: 'string' } } } })).not.toBe(fn);
    expect(fn({ a: 'x', b: 'y' })).toBe('{"a":"x"}');
    await one.close();
    await two.close();
  });

  it("reads a schema object's text once: another app's contexts hand over the same objects", () => {
    // What Fastify gives each context's serializer factory: a fresh copy of the shared schemas.
    const shared = { Item: { $id: 'Item', type: 'object', properties: { id: { type: 'string' } } } };
    const route = { method: 'GET', url: '/i', httpStatus: '200', schema: { $ref: 'Item#' } };
    const validation = { schema: body, method: 'POST', url: '/a', httpPart: 'body' };
    const validate = cachedValidatorCompiler('text-once', createValidatorCompiler());
    const first = cachedSerializerFactory()({ ...shared }, undefined)(route);
    const firstValidator = validate(validation);
    const stringify = vi.spyOn(JSON, 'stringify');
    try {
      expect(cachedSerializerFactory()({ ...shared }, undefined)(route)).toBe(first);
      expect(validate(validation)).toBe(firstValidator);
      expect(stringify).not.toHaveBeenCalled();
    } finally {
      stringify.mockRestore();
    }
    expect(first({ id: 'x', other: 1 })).toBe('{"id":"x"}');
  });

  it('compiles a response serializer when its route first answers, not when the app is built', async () => {
    let compiled = 0;
    const counting: ReturnType<typeof SerializerSelector> = (externalSchemas, options) => {
      const compile = SerializerSelector()(externalSchemas, options);
      return (route) => {
        compiled += 1;
        return compile(route);
      };
    };
    // A schema no other test of this process has compiled.
    const field = `f${Date.now()}`;
    const schema = { response: { 200: { type: 'object', properties: { [field]: { type: 'string' } } } } };
    const app = Fastify({
      schemaController: { compilersFactory: { buildSerializer: cachedSerializerFactory(counting) } },
    });
    app.get('/lazy', { schema }, async () => ({ [field]: 'kept', other: 'dropped' }));
    await app.ready();
    expect(compiled).toBe(0);
    expect((await app.inject({ method: 'GET', url: '/lazy' })).json()).toEqual({ [field]: 'kept' });
    expect((await app.inject({ method: 'GET', url: '/lazy' })).json()).toEqual({ [field]: 'kept' });
    expect(compiled).toBe(1);
    await app.close();
  });

  it("compiles every route's schemas on demand, and throws on one that does not compile", async () => {
    const t = await createTestApp();
    try {
      expect(() => compileSchemas()).not.toThrow();
      expect(compileSchemas()).toBe(0);
    } finally {
      await t.close();
    }
    const app = Fastify({ schemaController: { compilersFactory: { buildSerializer: cachedSerializerFactory() } } });
    const broken = { 200: { type: 'object', properties: { a: { type: 'string', pattern: '(' } } } };
    app.get('/broken', { schema: { response: broken } }, async () => ({ a: 'x' }));
    await app.ready();
    expect(() => compileSchemas()).toThrow();
    expect(compileSchemas()).toBe(0);
    await app.close();
    const validated = Fastify();
    validated.setValidatorCompiler(cachedValidatorCompiler('svc', createValidatorCompiler()));
    validated.post(
      '/broken',
      { schema: { body: { type: 'object', properties: { a: { type: 'nonsense' } } } } },
      () => ({}),
    );
    await validated.ready();
    expect(() => compileSchemas()).toThrow();
    expect(compileSchemas()).toBe(0);
    await validated.close();
  });
});

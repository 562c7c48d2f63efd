import fc from 'fast-check';
import { requestMessage, signHex, NODE_HEADERS } from '@svc/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKey, createTestApp, createTestNode, signUp, type TestApp, type TestNode } from '../../test/harness.js';

/**
 * Drives every route and method of the OpenAPI document with generated garbage (bodies shaped
 * after the route's schema and not, query strings, path parameters: NUL bytes, lone surrogates,
 * huge and negative numbers, deep nesting, wrong types), as a buyer, an operator, or a node with a
 * valid signature over the garbage, and asserts that nothing answers 5xx and that the server
 * still answers its health check. No route list: whatever the document lists is driven.
 * `SVC_FUZZ_RUNS` sets the runs per route (default 25), `SVC_FUZZ_SEED` replays a failure.
 */

const RUNS = Number(process.env.SVC_FUZZ_RUNS ?? 25);
const SEED = process.env.SVC_FUZZ_SEED ? Number(process.env.SVC_FUZZ_SEED) : undefined;
/** A request that takes longer than this is reported: nothing here should wait for anything. */
const HANG_MS = 10_000;

type Schema = Record<string, unknown>;
interface OpenApiDoc {
  paths: Record<
    string,
    Record<
      string,
      {
        parameters?: { name: string; in: string; schema?: Schema; required?: boolean }[];
        requestBody?: { content?: Record<string, { schema?: Schema }> };
        security?: unknown[];
      }
    >
  >;
  components?: { schemas?: Record<string, Schema> };
}

const NASTY_STRINGS = [
  '',
  '\u0000',
  'a\u0000b',
  '\ud800',
  'x\udfffy',
  '1e20',
  '-1',
  '9'.repeat(40),
  'null',
  'true',
  '[]',
  '{}',
  '../../etc/passwd',
  '%00',
  '%',
  '\u202e\u00e9\ud83d\ude00',
  ' '.repeat(3),
  'x'.repeat(5000),
  '<script>',
  "'; DROP TABLE jobs; --",
];
const NASTY_NUMBERS = [0, -1, 1, 1e20, -1e20, 2 ** 31, 2 ** 53, 2 ** 63, 1.5, -0.5, Number.MAX_VALUE, Number.MIN_VALUE];

const nastyString = fc.oneof(
  fc.constantFrom(...NASTY_STRINGS),
  fc.string({ maxLength: 40 }),
  fc.string({ unit: 'binary', maxLength: 20 }),
);
const nastyNumber = fc.oneof(
  fc.constantFrom(...NASTY_NUMBERS),
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
);
/** Arrays and objects nested `depth` deep. */
const deep = fc
  .integer({ min: 50, max: 1_000 })
  .chain((depth) =>
    fc.constantFrom(
      JSON.parse(`${'['.repeat(depth)}${']'.repeat(depth)}`) as unknown,
      JSON.parse(`${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`) as unknown,
    ),
  );
/** JSON text nested far deeper than any walk of a value could follow (10,000 and more levels). */
const deepText = fc
  .integer({ min: 10_000, max: 100_000 })
  .map(
    (depth) =>
      `{"metadata":${'['.repeat(depth)}${']'.repeat(depth)},"name":${'{"a":'.repeat(depth >> 4)}1${'}'.repeat(depth >> 4)}}`,
  );
const garbage: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 3, arbitrary: nastyString },
  { weight: 2, arbitrary: nastyNumber },
  { weight: 1, arbitrary: fc.constantFrom(null, true, false, [], {}) },
  { weight: 1, arbitrary: deep },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
);

function resolve(schema: Schema | undefined, doc: OpenApiDoc): Schema {
  let s = schema ?? {};
  for (let i = 0; i < 10 && typeof s.$ref === 'string'; i++) {
    const name = s.$ref.split('/').pop() ?? '';
    s = doc.components?.schemas?.[name] ?? {};
  }
  return s;
}

/** Values for `schema`: mostly shaped like it (so validation passes and the handler runs), sometimes garbage. */
function valueFor(raw: Schema | undefined, doc: OpenApiDoc, depth = 0): fc.Arbitrary<unknown> {
  const schema = resolve(raw, doc);
  if (depth > 6) return garbage;
  const shaped = shapedValue(schema, doc, depth);
  return fc.oneof({ weight: 5, arbitrary: shaped }, { weight: 1, arbitrary: garbage });
}

function shapedValue(schema: Schema, doc: OpenApiDoc, depth: number): fc.Arbitrary<unknown> {
  const alternatives = (schema.anyOf ?? schema.oneOf) as Schema[] | undefined;
  if (alternatives?.length) return fc.oneof(...alternatives.map((s) => valueFor(s, doc, depth + 1)));
  if (Array.isArray(schema.allOf)) {
    const parts = (schema.allOf as Schema[]).map((s) => resolve(s, doc));
    return shapedValue(
      {
        type: 'object',
        properties: Object.assign({}, ...parts.map((p) => p.properties ?? {})),
        required: parts.flatMap((p) => (p.required as string[] | undefined) ?? []),
      },
      doc,
      depth,
    );
  }
  if (schema.const !== undefined) return fc.constant(schema.const);
  if (Array.isArray(schema.enum)) return fc.constantFrom(...(schema.enum as unknown[]));
  const type = [schema.type].flat()[0];
  switch (type) {
    case 'string': {
      const examples = [schema.default, schema.example].filter((v) => typeof v === 'string') as string[];
      return fc.oneof(
        nastyString,
        fc.string({
          minLength: Number(schema.minLength ?? 0),
          maxLength: Math.min(Number(schema.maxLength ?? 30), 60),
        }),
        ...(examples.length ? [fc.constantFrom(...examples)] : []),
      );
    }
    case 'integer':
      return fc.oneof(
        fc.integer({ min: Number(schema.minimum ?? -10), max: Math.min(Number(schema.maximum ?? 1000), 1e9) }),
        nastyNumber,
      );
    case 'number':
      return fc.oneof(
        fc.double({
          min: Number(schema.minimum ?? -10),
          max: Math.min(Number(schema.maximum ?? 1000), 1e9),
          noNaN: true,
        }),
        nastyNumber,
      );
    case 'boolean':
      return fc.boolean();
    case 'array':
      return fc.array(valueFor(schema.items as Schema | undefined, doc, depth + 1), { maxLength: 4 });
    case 'object':
    default: {
      const properties = (schema.properties ?? {}) as Record<string, Schema>;
      const names = Object.keys(properties);
      const record = fc.record(Object.fromEntries(names.map((n) => [n, valueFor(properties[n], doc, depth + 1)])), {
        requiredKeys: [],
      });
      // required fields present more often than not, plus the odd unknown field
      return fc
        .tuple(record, fc.dictionary(nastyString, garbage, { maxKeys: 2 }), fc.boolean())
        .map(([known, extra, withExtra]) => (withExtra ? { ...known, ...extra } : known));
    }
  }
}

const pct = (s: string) =>
  [...Buffer.from(s, 'utf8')]
    .map((b) =>
      /[A-Za-z0-9_.~-]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `%${b.toString(16).padStart(2, '0')}`,
    )
    .join('');

/** A query-string or path value: mostly a plausible one, often hostile. */
function paramValue(name: string, schema: Schema | undefined, doc: OpenApiDoc): fc.Arbitrary<string> {
  // Long-poll waits (`*_ms`) are driven at zero or with garbage: the test must not sit in a poll.
  if (/_ms$/.test(name)) return fc.constantFrom('0', '-1', '1e20', 'abc', '%00', '', '0.5');
  return fc.oneof(
    valueFor(schema, doc).map((v) => pct(typeof v === 'string' ? v : (JSON.stringify(v) ?? ''))),
    fc.constantFrom('1e20', '-1', '99999999999999999999999', 'NaN', '%00', 'a%00b', '%ff%fe', '%', '', 'x'.repeat(300)),
  );
}

interface Probe {
  method: string;
  url: string;
  contentType?: string;
  body?: string | Buffer;
}

function multipartBodies(): fc.Arbitrary<{ contentType: string; body: Buffer }> {
  const part = (boundary: string, name: string, value: string, file = false) =>
    `--${boundary}\r\nContent-Disposition: form-data; name="${name}"${file ? '; filename="a.wav"\r\nContent-Type: audio/wav' : ''}\r\n\r\n${value}\r\n`;
  return fc
    .tuple(
      fc.oneof(fc.constantFrom('b', 'x'.repeat(300), 'B'.repeat(70)), fc.string({ minLength: 1, maxLength: 20 })),
      nastyString,
      fc.integer({ min: 0, max: 6 }),
      fc.constantFrom('whisper-base', 'tinyllama', '\u0000', ''),
    )
    .map(([boundary, text, shape, model]) => {
      const full = `${part(boundary, 'model', model)}${part(boundary, 'response_format', text)}${part(boundary, 'file', `RIFF${text}`, true)}--${boundary}--\r\n`;
      switch (shape) {
        case 0:
          return { contentType: `multipart/form-data; boundary=${boundary}`, body: Buffer.from(full) };
        case 1:
          return { contentType: 'multipart/form-data', body: Buffer.from(full) }; // no boundary
        case 2:
          return {
            contentType: `multipart/form-data; boundary=${boundary}`,
            body: Buffer.from(full.slice(0, Math.max(1, full.length >> 1))),
          }; // truncated
        case 3:
          return { contentType: `multipart/form-data; boundary=${'q'.repeat(300)}`, body: Buffer.from(full) }; // boundary over 256 characters
        case 4:
          return {
            contentType: `multipart/form-data; boundary=${boundary}`,
            body: Buffer.from(`--${boundary}\r\nContent-Disposition: form-data\r\n\r\nno name\r\n--${boundary}--\r\n`),
          };
        case 5:
          return { contentType: `multipart/form-data; boundary="${boundary}"`, body: Buffer.from(`${text}\u0000`) };
        default:
          return { contentType: 'multipart/form-data; boundary=', body: Buffer.from(full) };
      }
    });
}

function probes(
  method: string,
  path: string,
  op: OpenApiDoc['paths'][string][string],
  doc: OpenApiDoc,
): fc.Arbitrary<Probe> {
  const pathParams = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1] ?? '');
  const declared = op.parameters ?? [];
  const queryParams = declared.filter((p) => p.in === 'query');
  const pathArb = fc.tuple(
    ...pathParams.map((name) =>
      paramValue(name, declared.find((p) => p.in === 'path' && p.name === name)?.schema, doc),
    ),
    fc.constant(''),
  );
  const queryArb = fc
    .tuple(
      fc.record(Object.fromEntries(queryParams.map((p) => [p.name, paramValue(p.name, p.schema, doc)])), {
        requiredKeys: queryParams.filter((p) => /_ms$/.test(p.name)).map((p) => p.name),
      }),
      fc.dictionary(fc.constantFrom('offset', 'limit', 'q', 'x', '%00', 'a[b]'), paramValue('extra', undefined, doc), {
        maxKeys: 2,
      }),
    )
    .map(([known, extra]) =>
      Object.entries({ ...extra, ...known })
        .map(([k, v]) => `${pct(k)}=${v}`)
        .join('&'),
    );
  const content = op.requestBody?.content ?? {};
  const types = Object.keys(content);
  let bodyArb: fc.Arbitrary<{ contentType?: string; body?: string | Buffer }> = fc.constant({});
  if (types.some((t) => t.startsWith('multipart/'))) bodyArb = multipartBodies();
  else if (types.includes('application/x-ndjson')) {
    bodyArb = fc
      .array(
        fc.oneof(
          fc.jsonValue({ maxDepth: 2 }).map((v) => JSON.stringify(v)),
          nastyString,
          fc
            .record({ type: fc.constantFrom('delta', 'done', 'error'), content: nastyString, usage: garbage })
            .map((v) => JSON.stringify(v)),
        ),
        { maxLength: 4 },
      )
      .map((lines) => ({ contentType: 'application/x-ndjson', body: lines.join('\n') }));
  } else if (types.length > 0 || method === 'POST' || method === 'PATCH' || method === 'PUT') {
    const schema = content['application/json']?.schema ?? content[types[0] ?? '']?.schema;
    bodyArb = fc.oneof(
      {
        weight: 6,
        arbitrary: valueFor(schema, doc).map((v) => ({
          contentType: 'application/json',
          body: JSON.stringify(v) ?? 'null',
        })),
      },
      {
        weight: 1,
        arbitrary: fc
          .constantFrom('{', '{"a":1,}', '\u0000', '"\\u0000"', '{"a":"\\ud800"}', '[1e99999]', '')
          .map((body) => ({ contentType: 'application/json', body })),
      },
      { weight: 1, arbitrary: deepText.map((body) => ({ contentType: 'application/json', body })) },
      { weight: 1, arbitrary: fc.constant({ contentType: 'text/plain', body: 'plain' }) },
    );
  }
  return fc.tuple(pathArb, queryArb, bodyArb).map(([values, query, body]) => {
    let i = 0;
    const filled = path.replace(/\{[^}]+\}/g, () => values[i++] || 'x');
    return { method, url: query ? `${filled}?${query}` : filled, ...body };
  });
}

describe('every route of the OpenAPI document, driven with garbage', () => {
  let t: TestApp;
  let buyerKey: string;
  let operatorKey: string;
  let node: TestNode;
  let doc: OpenApiDoc;
  beforeAll(async () => {
    t = await createTestApp({
      env: {
        SVC_RATE_LIMIT_BURST: '1000000',
        SVC_ORG_RATE_LIMIT_BURST: '1000000',
        SVC_ANON_RATE_LIMIT_BURST: '1000000',
        SVC_LOG_LEVEL: 'warn',
        SVC_GATEWAY_TIMEOUT_MS: '2000',
      },
    });
    const buyer = await signUp(t.app);
    buyerKey = buyer.apiKey;
    operatorKey = await createKey(t.app, buyer, ['operator']);
    // A registered node for the signed routes; it serves no catalogue model, so no request waits for it.
    node = await createTestNode(t.app, operatorKey, { models: [] });
    doc = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json() as OpenApiDoc;
  });
  afterAll(() => t.close());

  function authOf(method: string, path: string): 'public' | 'node' | 'operator' | 'buyer' {
    const url = path.replace(/\{([^}]+)\}/g, ':$1');
    const auth = t.app.routeTable.find((r) => r.method === method && r.url === url)?.auth;
    if (!auth || 'public' in auth) return 'public';
    if ('node' in auth) return 'node';
    if ('permission' in auth && /^(nodes|payouts):/.test(auth.permission)) return 'operator';
    return 'buyer';
  }

  async function send(probe: Probe, auth: ReturnType<typeof authOf>) {
    const headers: Record<string, string> = {};
    if (probe.contentType) headers['content-type'] = probe.contentType;
    if (auth === 'buyer') headers.authorization = `Bearer ${buyerKey}`;
    if (auth === 'operator') headers.authorization = `Bearer ${operatorKey}`;
    if (auth === 'node') {
      const timestamp = Date.now();
      headers[NODE_HEADERS.node] = node.nodeId;
      headers[NODE_HEADERS.timestamp] = String(timestamp);
      try {
        headers[NODE_HEADERS.signature] = signHex(
          requestMessage({ method: probe.method, pathWithQuery: probe.url, timestamp, body: probe.body ?? '' }),
          node.privateKey,
        );
      } catch {
        headers[NODE_HEADERS.signature] = '0'.repeat(128); // a path no node can sign: the server must refuse it all the same
      }
    }
    let timer: NodeJS.Timeout | undefined;
    const hung = new Promise<'hung'>((resolve) => (timer = setTimeout(() => resolve('hung'), HANG_MS)));
    const res = await Promise.race([
      t.app.inject({ method: probe.method as 'GET', url: probe.url, headers, payload: probe.body }),
      hung,
    ]);
    clearTimeout(timer);
    return res;
  }

  it('answers no 5xx (503 no_capacity aside: no node serves a model here) and stays up', async () => {
    const routes = Object.entries(doc.paths).flatMap(([path, ops]) =>
      Object.entries(ops).map(([method, op]) => ({ path, method: method.toUpperCase(), op })),
    );
    expect(routes.length).toBeGreaterThan(50);
    const failures: string[] = [];
    const started = Date.now();
    for (const { path, method, op } of routes) {
      const auth = authOf(method, path);
      try {
        await fc.assert(
          fc.asyncProperty(probes(method, path, op, doc), async (probe) => {
            const res = await send(probe, auth);
            if (res === 'hung') throw new Error(`${probe.method} ${probe.url.slice(0, 200)} took over ${HANG_MS} ms`);
            const body = res.body.slice(0, 300);
            const allowed = res.statusCode < 500 || (res.statusCode === 503 && body.includes('no_capacity'));
            if (!allowed) {
              const logged = t.logs.lines.filter((l) => l.includes('request failed')).slice(-1)[0] ?? '';
              throw new Error(
                `${probe.method} ${probe.url.slice(0, 200)} ${String(probe.body ?? '').slice(0, 300)} -> ${res.statusCode} ${body} ${logged.slice(0, 600)}`,
              );
            }
            if (res.statusCode >= 400 && String(res.headers['content-type'] ?? '').includes('json')) {
              const err = res.json() as { code?: unknown; error?: unknown };
              const shaped =
                (typeof err.code === 'number' && typeof err.error === 'string') ||
                (typeof err.error === 'object' && err.error !== null);
              if (!shaped)
                throw new Error(
                  `${probe.method} ${probe.url.slice(0, 200)} -> ${res.statusCode} without the error shape: ${body}`,
                );
            }
          }),
          { numRuns: RUNS, seed: SEED, endOnFailure: true },
        );
      } catch (err) {
        const cause = (err as Error & { cause?: unknown }).cause;
        const why =
          cause instanceof Error
            ? cause.message
            : (err as Error).message
                .split('\n')
                .filter((l) => /Got error|took over|->/.test(l))
                .join(' | ');
        failures.push(`${method} ${path} (${auth}): ${why.slice(0, 600)}`);
      }
    }
    const health = await t.app.inject({ method: 'GET', url: '/api/v1/health' });
    console.log(`[fuzz] ${routes.length} routes x ${RUNS} runs in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    expect(failures).toEqual([]);
    expect(health.statusCode).toBe(200);
  }, 600_000);
});

/**
 * Store statements per gateway chat request, by statement: the count and the time each takes
 * (waiting for the store's one connection included, on PGlite). The server and one node agent run
 * in this process over the OpenAI test server, so the figures name what a request asks of the
 * store, not the end-to-end latency (bench/gateway.ts measures that). See bench/README.md.
 *
 * @example
 * npx tsx bench/statements.ts --requests 100
 * npx tsx bench/statements.ts --requests 100 --trace 3
 * npx tsx bench/statements.ts --requests 400 --concurrency 16   # where the writer's flushes batch
 * npx tsx bench/statements.ts --requests 800 --concurrency 16 --node-concurrency 16   # a node that takes all 16 at once
 * DATABASE_URL=postgres://... npx tsx bench/statements.ts
 * SVC_EVIDENCE_GATEWAY_ROWS=1 npx tsx bench/statements.ts   # gateway evidence as rows, the way before 2026-11-27
 */
import { parseArgs } from 'node:util';
import type { Db, Queryable, QueryResult } from '../packages/server/src/platform/db/index.js';
import { startGatewayFixture } from '../packages/server/test/gateway-fixture.js';
import { positiveInt, wholeNumber } from './lib.js';

const { values } = parseArgs({
  options: {
    requests: { type: 'string', default: '100' },
    trace: { type: 'string', default: '0' },
    concurrency: { type: 'string', default: '1' },
    'node-concurrency': { type: 'string', default: '4' },
  },
});
const requests = positiveInt('requests', values.requests);
// Loops asking at once: with more than one, the group-commit writer's flushes hold several requests.
const concurrency = positiveInt('concurrency', values.concurrency);
const traces = wholeNumber('trace', values.trace);

// SVC_EVIDENCE_GATEWAY_ROWS=1: gateway evidence recorded the old way (rows, signed as it closes), to compare.
const f = await startGatewayFixture({
  env: { SVC_LOG_LEVEL: 'silent', SVC_EVIDENCE_GATEWAY_ROWS: process.env.SVC_EVIDENCE_GATEWAY_ROWS ?? '' },
});
// The node agent's concurrency (the fixture's default, 4): with fewer slots than loops, most work
// waits in the store for a free slot, and its opening commits alone before dispatch.
await f.addNode({ concurrency: positiveInt('node-concurrency', values['node-concurrency']) });
const stats = new Map<string, { n: number; ms: number }>();
let recording = false;
// --trace: one request's statements in order, each with when it started (from the request's start).
let trace: { at: number; ms: number; label: string }[] | undefined;
let traceStart = 0;

function record(label: string, ms: number): void {
  const key = label.replace(/\s+/g, ' ').slice(0, 100);
  trace?.push({ at: performance.now() - ms - traceStart, ms, label: key });
  if (!recording) return;
  const s = stats.get(key) ?? { n: 0, ms: 0 };
  s.n++;
  s.ms += ms;
  stats.set(key, s);
}

async function timed<T>(label: string, run: () => Promise<T>): Promise<T> {
  const started = performance.now();
  try {
    return await run();
  } finally {
    record(label, performance.now() - started);
  }
}

function counting(q: Queryable): Queryable {
  return {
    query: <Row>(sql: string, params?: readonly unknown[]): Promise<QueryResult<Row>> =>
      timed(sql, () => q.query<Row>(sql, params)),
    exec: (sql: string) => timed(`EXEC ${sql}`, () => q.exec(sql)),
  };
}

// Every module reaches the store through ctx.db, so wrapping its methods counts every statement.
const db: Db = f.server.ctx.db;
const plain = { query: db.query, exec: db.exec, transaction: db.transaction };
const wrapped = counting(plain);
db.query = wrapped.query;
db.exec = wrapped.exec;
db.transaction = (fn) =>
  timed('(whole transaction, statements inside counted too)', () => plain.transaction((tx) => fn(counting(tx))));

const body = JSON.stringify({
  model: 'tinyllama',
  messages: [{ role: 'user', content: 'the quick brown fox' }],
  max_tokens: 16,
});
async function chat(): Promise<void> {
  const res = await fetch(`${f.server.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${f.buyer.apiKey}` },
    body,
  });
  if (res.status !== 200) throw new Error(`chat answered ${res.status}`);
  await res.json();
}

/** Rows of the tables a gateway request writes, and the evidence certificates signed so far. */
async function tally(): Promise<Map<string, number>> {
  const tables = [
    'gateway_requests',
    'work_items',
    'receipts',
    'credit_transactions',
    'evidence_runs',
    'evidence_events',
    'log_leaves',
  ];
  const out = new Map<string, number>();
  for (const t of tables)
    out.set(t, (await plain.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${t}`)).rows[0]?.n ?? 0);
  const signed = await plain.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM evidence_runs WHERE root_signature_hex IS NOT NULL',
  );
  out.set('certificates signed', signed.rows[0]?.n ?? 0);
  return out;
}

for (let i = 0; i < 30; i++) await chat();
await new Promise((r) => setTimeout(r, 300));
const before = await tally();
recording = true;
const started = performance.now();
let asked = 0;
await Promise.all(
  Array.from({ length: concurrency }, async () => {
    while (asked < requests) {
      asked++;
      await chat();
    }
  }),
);
const elapsed = performance.now() - started;
await new Promise((r) => setTimeout(r, 300));
recording = false;
const after = await tally();

console.log(
  `store ${db.kind}; ${requests} chat requests${concurrency > 1 ? ` from ${concurrency} concurrent loops` : ', sequential'}, per request:`,
);
console.log('  count      ms  statement');
let count = 0;
let ms = 0;
for (const [sql, s] of [...stats].sort((a, b) => b[1].ms - a[1].ms)) {
  if (!sql.startsWith('(whole')) {
    count += s.n;
    ms += s.ms;
  }
  console.log(`${(s.n / requests).toFixed(2).padStart(7)} ${(s.ms / requests).toFixed(2).padStart(7)}  ${sql}`);
}
console.log(
  `total: ${(count / requests).toFixed(1)} statements (BEGIN and COMMIT not counted), ${(ms / requests).toFixed(1)} ms in them; ${(elapsed / requests).toFixed(1)} ms per request (wall / requests)`,
);

// Rows written (and certificates signed at write time) per request, by table: counted before any
// evidence is read, so a certificate signed when first read is not among them.
const rows = [...after].map(([t, n]) => [t, (n - (before.get(t) ?? 0)) / requests] as const);
console.log(`rows per request: ${rows.map(([t, n]) => `${t} ${n.toFixed(2)}`).join(', ')}`);
console.log(
  `total: ${rows
    .filter(([t]) => t !== 'certificates signed')
    .reduce((a, [, n]) => a + n, 0)
    .toFixed(2)} rows per request`,
);

for (let i = 0; i < traces; i++) {
  await new Promise((r) => setTimeout(r, 100));
  trace = [];
  traceStart = performance.now();
  await chat();
  const total = performance.now() - traceStart;
  await new Promise((r) => setTimeout(r, 100));
  console.log(
    `\nrequest ${i + 1}: answered at ${total.toFixed(2)} ms; statements by start (ms from the request's start, duration):`,
  );
  for (const e of trace.sort((a, b) => a.at - b.at))
    console.log(`${e.at.toFixed(2).padStart(8)} ${e.ms.toFixed(2).padStart(6)}  ${e.label.slice(0, 90)}`);
  trace = undefined;
}
await f.close();

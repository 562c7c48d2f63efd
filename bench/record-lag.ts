/**
 * How long after its answer a gateway request's records are visible to a reader that does not go
 * through the answering instance (another instance on the same PostgreSQL, or a direct store
 * read): the group-commit writer's lag (docs/gateway.md, "Records written behind the answer").
 * The server and one node agent run in this process over the OpenAI test server; after each
 * answer the store is polled (a plain statement on the store's connection, not a request through
 * the instance, which would wait for the flush) until the request reads `completed`. Then
 * `--concurrency` loops send as many requests again and the bench counts transactions per request
 * and completions per flush (group commit at work).
 *
 * @example
 * npx tsx bench/record-lag.ts --requests 200 --concurrency 16
 * SVC_WRITER_FLUSH_MS=10 npx tsx bench/record-lag.ts
 * DATABASE_URL=postgres://... npx tsx bench/record-lag.ts
 */
import { parseArgs } from 'node:util';
import { startGatewayFixture } from '../packages/server/test/gateway-fixture.js';
import { positiveInt } from './lib.js';

const { values } = parseArgs({
  options: { requests: { type: 'string', default: '200' }, concurrency: { type: 'string', default: '16' } },
});
const requests = positiveInt('requests', values.requests);
const concurrency = positiveInt('concurrency', values.concurrency);

const f = await startGatewayFixture({ env: { SVC_LOG_LEVEL: 'silent' } });
await f.addNode();
const { db, config } = f.server.ctx;
const CHAT = {
  model: 'tinyllama',
  messages: [{ role: 'user' as const, content: 'how long until stored' }],
  max_tokens: 16,
};
for (let i = 0; i < 20; i++) await f.openai().chat.completions.create(CHAT);

const lags: number[] = [];
let seenAtAnswer = 0;
for (let i = 0; i < requests; i++) {
  const answer = await f.openai().chat.completions.create(CHAT);
  const answeredAt = performance.now();
  for (let polls = 0; ; polls++) {
    const { rows } = await db.query<{ status: string }>('SELECT status FROM gateway_requests WHERE id = $1', [
      answer.id,
    ]);
    if (rows[0]?.status === 'completed') {
      if (polls === 0) seenAtAnswer++;
      break;
    }
    await new Promise((resolve) => setTimeout(resolve, 0.2));
  }
  lags.push(performance.now() - answeredAt);
}
lags.sort((a, b) => a - b);
const at = (q: number) => (lags[Math.min(lags.length - 1, Math.floor(q * lags.length))] ?? 0).toFixed(2);
console.log(
  `${db.kind}, SVC_WRITER_FLUSH_MS=${config.writer.flushMs}, ${requests} sequential chat requests: ` +
    `records visible after the answer p50 ${at(0.5)} ms, p99 ${at(0.99)} ms, max ${at(1)} ms; ` +
    `${seenAtAnswer} already visible at the first read`,
);

// Group commit under load: transactions per request and writes per flush, `concurrency` loops.
let transactions = 0;
const transaction = db.transaction.bind(db);
db.transaction = (fn) => {
  transactions++;
  return transaction(fn);
};
const { writer } = f.server.ctx;
const enqueue = writer.enqueue.bind(writer);
let writes = 0;
writer.enqueue = (write) => {
  writes++;
  return enqueue(write);
};
let sent = 0;
await Promise.all(
  Array.from({ length: concurrency }, async () => {
    while (sent < requests) {
      sent++;
      await f.openai().chat.completions.create(CHAT);
    }
  }),
);
await writer.settled();
const flushes = transactions - sent;
console.log(
  `${concurrency} concurrent loops, ${sent} chat requests: ${(transactions / sent).toFixed(2)} transactions per request ` +
    `(the opening's, plus ${flushes} flushes for ${writes} completions: ${(writes / Math.max(1, flushes)).toFixed(2)} per flush)`,
);
await f.close();

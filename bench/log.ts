/**
 * Checkpoint latency of the transparency log (docs/transparency-log.md): how long after a run
 * closes (its `signed_at`, the leaf's `closed_at`) a signed checkpoint holds it, under
 * `--concurrency` loops of non-streamed chat for `--duration` seconds. The server and one node
 * agent run in this process over the OpenAI test server (as bench/record-lag.ts); a watcher reads
 * the latest checkpoint's size from the store every 2 ms and notes when each size appeared.
 * Also reports the requests answered, the checkpoints signed and leaves per checkpoint.
 *
 * @example
 * npx tsx bench/log.ts --duration 20 --concurrency 16
 * SVC_LOG_CHECKPOINT_MS=250 npx tsx bench/log.ts
 * DATABASE_URL=postgres://... npx tsx bench/log.ts
 */
import { parseArgs } from 'node:util';
import { startGatewayFixture } from '../packages/server/test/gateway-fixture.js';
import { positiveInt } from './lib.js';

const { values } = parseArgs({
  options: { duration: { type: 'string', default: '20' }, concurrency: { type: 'string', default: '16' } },
});
const duration = positiveInt('duration', values.duration);
const concurrency = positiveInt('concurrency', values.concurrency);

const f = await startGatewayFixture({
  env: {
    SVC_LOG_LEVEL: 'silent',
    ...(process.env.SVC_LOG_CHECKPOINT_MS ? { SVC_LOG_CHECKPOINT_MS: process.env.SVC_LOG_CHECKPOINT_MS } : {}),
  },
});
await f.addNode();
const { db, config } = f.server.ctx;
const CHAT = { model: 'tinyllama', messages: [{ role: 'user' as const, content: 'log me' }], max_tokens: 16 };
for (let i = 0; i < 50; i++) await f.openai().chat.completions.create(CHAT);

// When each checkpoint size was first seen (wall clock, as the leaves' closed_at).
const seen: { size: number; at: number }[] = [];
let watching = true;
const watcher = (async () => {
  while (watching) {
    const { rows } = await db.query<{ size: number }>(
      'SELECT COALESCE(max(tree_size), 0)::float8 AS size FROM log_checkpoints',
    );
    const size = rows[0]?.size ?? 0;
    if (size > (seen[seen.length - 1]?.size ?? -1)) seen.push({ size, at: Date.now() });
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
})();

const startSize = (await db.query<{ n: number }>('SELECT count(*)::float8 AS n FROM log_leaves')).rows[0]?.n ?? 0;
const until = Date.now() + duration * 1000;
let answered = 0;
await Promise.all(
  Array.from({ length: concurrency }, async () => {
    while (Date.now() < until) {
      await f.openai().chat.completions.create(CHAT);
      answered++;
    }
  }),
);
// Every leaf of the bench in a checkpoint, then the watcher stops.
const deadline = Date.now() + 30_000;
for (;;) {
  const { rows } = await db.query<{ pending: number; total: number }>(
    'SELECT count(*) FILTER (WHERE leaf_index IS NULL)::float8 AS pending, count(*)::float8 AS total FROM log_leaves',
  );
  const total = rows[0]?.total ?? 0;
  if ((rows[0]?.pending ?? 1) === 0 && (seen[seen.length - 1]?.size ?? 0) >= total) break;
  if (Date.now() > deadline) throw new Error('leaves still pending 30 s after the load');
  await new Promise((resolve) => setTimeout(resolve, 20));
}
watching = false;
await watcher;

const { rows: leaves } = await db.query<{ leaf_index: number; closed_at: string }>(
  'SELECT leaf_index::float8 AS leaf_index, closed_at FROM log_leaves WHERE leaf_index >= $1 ORDER BY leaf_index',
  [startSize],
);
const latencies = leaves.map((l) => {
  const cp = seen.find((s) => s.size > l.leaf_index);
  return (cp?.at ?? Number.NaN) - Date.parse(l.closed_at);
});
latencies.sort((a, b) => a - b);
const at = (q: number) => (latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0).toFixed(0);
const checkpoints = seen.filter((s) => s.size > startSize).length;
console.log(
  `${db.kind}, SVC_LOG_CHECKPOINT_MS=${config.log.checkpointMs}, ${concurrency} loops of chat for ${duration} s: ` +
    `${answered} requests (${(answered / duration).toFixed(0)}/s), ${leaves.length} runs logged in ${checkpoints} checkpoints ` +
    `(${(leaves.length / Math.max(1, checkpoints)).toFixed(0)} leaves each); run closed -> in a signed checkpoint: ` +
    `p50 ${at(0.5)} ms, p99 ${at(0.99)} ms, max ${at(1)} ms`,
);
await f.close();

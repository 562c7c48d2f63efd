/**
 * The real scheduler and store under load: N simulated nodes long-polling through `pollWork`
 * (the code behind GET /api/v1/node/work) while M jobs are submitted through `createJob`.
 * Reports assignment latency (pending -> assigned, from the jobs' own timestamps) and jobs
 * assigned per second. Set DATABASE_URL to run it on PostgreSQL. See bench/README.md.
 *
 * @example
 * npx tsx bench/scheduler.ts --nodes 1000 --jobs 10000 --concurrency 32
 */
import { availableParallelism, cpus } from 'node:os';
import { parseArgs } from 'node:util';
import { createContext, closeContext, loadConfig } from '@svc/server';
import { createTestStore } from '@svc/server/testing';
import { signup } from '../packages/server/src/modules/auth/service.js';
import { createJob } from '../packages/server/src/modules/jobs/service.js';
import { upsertNode, type NodeRow } from '../packages/server/src/modules/nodes/store.js';
import { pollWork } from '../packages/server/src/modules/scheduler/node-work.js';
import { percentile } from '../packages/server/src/modules/jobs/sla.js';
import type { Principal } from '../packages/server/src/platform/principal.js';
import { positiveInt, printTable } from './lib.js';

const { values } = parseArgs({
  options: {
    nodes: { type: 'string', default: '1000' },
    jobs: { type: 'string', default: '10000' },
    concurrency: { type: 'string', default: '32' },
    buyers: { type: 'string', default: '16' },
  },
});
const nodeCount = positiveInt('nodes', values.nodes);
const jobCount = positiveInt('jobs', values.jobs);
const concurrency = positiveInt('concurrency', values.concurrency);
const buyerCount = positiveInt('buyers', values.buyers);
const COUNTRIES = ['CA', 'US', 'FR', 'DE', 'JP'];

const store = await createTestStore();
const ctx = await createContext(
  loadConfig(
    { 'data-dir': store.dataDir, port: '0' },
    {
      SVC_LOG_LEVEL: 'silent',
      SVC_FREE_TIER_CENTS: '0',
      ...(store.databaseUrl ? { DATABASE_URL: store.databaseUrl } : {}),
    },
  ),
);
let stopped = false;
try {
  // Several buyers: a job's budget hold locks its organization's account, so one buyer's
  // submissions serialise on it; a marketplace has many.
  const principals: Principal[] = [];
  for (let b = 0; b < buyerCount; b++) {
    const buyer = await signup(ctx, { email: `bench-buyer-${b}@example.test`, password: 'benchmark password' });
    await ctx.ledger.credit(buyer.organization.id, 1_000_000_000, { txType: 'topup', description: 'bench' });
    principals.push({
      kind: 'session',
      orgId: buyer.organization.id,
      buyerId: buyer.buyer_id,
      role: 'owner',
      scopes: ['buyer'],
    });
  }
  const operator = await signup(ctx, { email: 'bench-operator@example.test', password: 'benchmark password' });
  const nodes: NodeRow[] = [];
  for (let i = 0; i < nodeCount; i++) {
    const row = await upsertNode(ctx.db, {
      id: `node_bench${String(i).padStart(21, '0')}`,
      orgId: operator.organization.id,
      pubkey: i.toString(16).padStart(64, '0'),
      fields: {
        name: `bench-${i}`,
        device_type: 'sim',
        device_class: 'cpu',
        gpu_model: null,
        cpu_cores: 8,
        ram_bytes: 2 ** 34,
        vram_bytes: 0,
        country: COUNTRIES[i % COUNTRIES.length] ?? 'CA',
        region: null,
        models: ['tinyllama'],
        capabilities: ['cpu'],
        max_concurrency: 100_000,
        price_micro_per_unit: {},
        green: false,
        attestation_method: 0,
        attestation_verified: false,
        bandwidth_mbps: null,
        geohash_bucket: null,
        sensors: null,
      },
    });
    if (row) nodes.push(row);
  }
  // Every simulated node long-polls in a loop, as the agent does.
  const loops = nodes.map(async (node) => {
    while (!stopped) await pollWork(ctx, node, { waitMs: 25_000, max: 16 });
  });
  console.log(
    `node ${process.version}, ${availableParallelism()} CPUs (${cpus()[0]?.model ?? 'unknown'}), store ${ctx.db.kind}`,
  );
  console.log(
    `${nodes.length} nodes long-polling; ${buyerCount} buyers submitting ${jobCount} jobs, ${concurrency} at a time (a fifth pinned to a country)\n`,
  );
  const started = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < jobCount) {
        const i = next++;
        const pin = i % 5 === 0 ? { strict_jurisdiction: COUNTRIES[i % COUNTRIES.length] } : {};
        await createJob(ctx, principals[i % principals.length] ?? (principals[0] as Principal), {
          kind: 1,
          budget: 0.01,
          max_price_per_unit: 0.00001,
          currency: 'CAD',
          inline_text: `job ${i}`,
          ...pin,
        });
      }
    }),
  );
  const submitted = performance.now();
  for (;;) {
    const { rows } = await ctx.db.query<{ n: number }>("SELECT count(*)::int AS n FROM jobs WHERE status = 'pending'");
    if ((rows[0]?.n ?? 0) === 0) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  const finished = performance.now();
  const { rows } = await ctx.db.query<{ ms: number }>(
    'SELECT (extract(epoch FROM (assigned_at - pending_at)) * 1000)::float8 AS ms FROM jobs WHERE assigned_at IS NOT NULL ORDER BY ms',
  );
  const ms = rows.map((r) => r.ms);
  const violations = await ctx.db.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM jobs j JOIN nodes n ON n.id = j.node_id WHERE j.spec->>'strict_jurisdiction' IS NOT NULL AND j.spec->>'strict_jurisdiction' <> n.country",
  );
  const fmt = (n: number) => n.toFixed(2);
  printTable([
    ['jobs assigned', 'p50 ms', 'p95 ms', 'p99 ms', 'assigned/s', 'submitted/s', 'pin violations'],
    [
      String(ms.length),
      fmt(percentile(ms, 0.5)),
      fmt(percentile(ms, 0.95)),
      fmt(percentile(ms, 0.99)),
      (ms.length / ((finished - started) / 1000)).toFixed(0),
      (jobCount / ((submitted - started) / 1000)).toFixed(0),
      String(violations.rows[0]?.n ?? 0),
    ],
  ]);
  stopped = true;
  await Promise.race([Promise.all(loops), new Promise((r) => setTimeout(r, 3000))]);
} finally {
  stopped = true;
  await closeContext(ctx);
  await store.drop();
}

/**
 * The real scheduler and store under load: N simulated nodes long-polling through `pollWork`
 * (the code behind GET /api/v1/node/work) while M jobs are submitted through `createJob`.
 * Reports assignment latency three ways (the store's pending -> assigned timestamps; submit ->
 * the node's poll answering with the job; the submission call itself), jobs assigned per second,
 * and with `--statements` the store statements per job. `--store postgres` starts a throwaway
 * PostgreSQL (or set DATABASE_URL). See bench/README.md.
 *
 * @example
 * npx tsx bench/scheduler.ts --nodes 1000 --jobs 10000 --concurrency 32 --store postgres
 */
import { availableParallelism, cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { createContext, closeContext, loadConfig } from '@svc/server';
import { createTestStore } from '@svc/server/testing';
import { signup } from '../packages/server/src/modules/auth/service.js';
import { createJob } from '../packages/server/src/modules/jobs/service.js';
import { upsertNode, type NodeRow } from '../packages/server/src/modules/nodes/store.js';
import { pollWork } from '../packages/server/src/modules/work/node-work.js';
import { percentile } from '../packages/server/src/modules/jobs/sla.js';
import type { Principal } from '../packages/server/src/platform/principal.js';
import type { Db, Queryable, QueryResult } from '../packages/server/src/platform/db/index.js';
import { positiveInt, printTable } from './lib.js';
import { benchStore, STORE_OPTION } from './postgres.js';

const { values } = parseArgs({
  options: {
    nodes: { type: 'string', default: '1000' },
    jobs: { type: 'string', default: '10000' },
    concurrency: { type: 'string', default: '32' },
    buyers: { type: 'string', default: '16' },
    store: STORE_OPTION,
    statements: { type: 'boolean', default: false },
  },
});
const nodeCount = positiveInt('nodes', values.nodes);
const jobCount = positiveInt('jobs', values.jobs);
const concurrency = positiveInt('concurrency', values.concurrency);
const buyerCount = positiveInt('buyers', values.buyers);
const COUNTRIES = ['CA', 'US', 'FR', 'DE', 'JP'];

const cluster = benchStore(values.store);
const store = await createTestStore();
const ctx = await createContext(
  loadConfig(
    { 'data-dir': store.dataDir, port: '0' },
    {
      SVC_LOG_LEVEL: 'silent',
      SVC_FREE_TIER_CENTS: '0',
      // The simulated nodes never heartbeat: no lease may lapse (and re-queue its job) mid-run.
      SVC_LEASE_SECONDS: '600',
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
  // Every simulated node long-polls in a loop, as the agent does; the moment its poll answers
  // with a job is when the node has it. Jobs come once every node waits (connected beforehand).
  let parked = 0;
  const wait = ctx.jobSignal.wait.bind(ctx.jobSignal);
  ctx.jobSignal.wait = (...args) => {
    parked++;
    return wait(...args).finally(() => parked--);
  };
  const received = new Map<string, number>();
  const loops = nodes.map(async (node) => {
    while (!stopped) {
      const { work } = await pollWork(ctx, node, { waitMs: 25_000, max: 16 });
      const at = performance.now();
      for (const w of work) if (!received.has(w.job_id)) received.set(w.job_id, at);
    }
  });
  const statements = new Map<string, { n: number; ms: number }>();
  if (values.statements) countStatements(ctx.db, statements);
  const version = (await ctx.db.query<{ v: string }>('SELECT version() AS v')).rows[0]?.v.split(' ').slice(0, 2);
  console.log(
    `node ${process.version}, ${availableParallelism()} CPUs (${cpus()[0]?.model ?? 'unknown'}), load ${loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}, store ${ctx.db.kind} (${version?.join(' ') ?? '?'}${ctx.db.kind === 'pglite' ? ', PGlite' : ''})`,
  );
  console.log(
    `${nodes.length} nodes long-polling; ${buyerCount} buyers submitting ${jobCount} jobs, ${concurrency} at a time (a fifth pinned to a country)\n`,
  );
  while (parked < nodes.length) await new Promise((r) => setTimeout(r, 50));
  const submittedAt = new Map<string, { call: number; returned: number }>();
  const started = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < jobCount) {
        const i = next++;
        const pin = i % 5 === 0 ? { strict_jurisdiction: COUNTRIES[i % COUNTRIES.length] } : {};
        const call = performance.now();
        const job = await createJob(ctx, principals[i % principals.length] ?? (principals[0] as Principal), {
          kind: 1,
          budget: 0.01,
          max_price_per_unit: 0.00001,
          currency: 'CAD',
          inline_text: `job ${i}`,
          ...pin,
        });
        submittedAt.set(job.job_id, { call, returned: performance.now() });
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
  const duplicates = await ctx.db.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM (SELECT job_id FROM work_items WHERE type = 'job' AND status <> 'lost' GROUP BY job_id HAVING count(*) > 1) d",
  );
  const violations = await ctx.db.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM jobs j JOIN nodes n ON n.id = j.node_id WHERE j.spec->>'strict_jurisdiction' IS NOT NULL AND j.spec->>'strict_jurisdiction' <> n.country",
  );
  const counted = [...statements.values()].reduce((sum, s) => sum + s.n, 0);
  // Give the last polls' answers a moment to be seen.
  await new Promise((r) => setTimeout(r, 200));
  const toNode: number[] = [];
  const call: number[] = [];
  const afterAnswer: number[] = [];
  for (const [jobId, at] of submittedAt) {
    call.push(at.returned - at.call);
    const got = received.get(jobId);
    if (got === undefined) continue;
    toNode.push(got - at.call);
    // 0 when the node had the job before its submission answered (assigned in that transaction).
    afterAnswer.push(Math.max(0, got - at.returned));
  }
  for (const xs of [toNode, call, afterAnswer]) xs.sort((a, b) => a - b);
  const fmt = (n: number) => n.toFixed(2);
  const line = (name: string, xs: number[]) => [
    name,
    String(xs.length),
    fmt(percentile(xs, 0.5)),
    fmt(percentile(xs, 0.95)),
    fmt(percentile(xs, 0.99)),
  ];
  printTable([
    ['latency', 'jobs', 'p50 ms', 'p95 ms', 'p99 ms'],
    line('assignment (pending_at -> assigned_at, store clock)', ms),
    line("submit call -> the node's poll answers with it", toNode),
    line('submission call (createJob)', call),
    line('submission answered -> the node has it (0: before)', afterAnswer),
  ]);
  console.log('');
  printTable([
    ['assigned/s', 'submitted/s', 'pin violations', 'jobs two nodes got'],
    [
      (ms.length / ((finished - started) / 1000)).toFixed(0),
      (jobCount / ((submitted - started) / 1000)).toFixed(0),
      String(violations.rows[0]?.n ?? 0),
      String(duplicates.rows[0]?.n ?? 0),
    ],
  ]);
  if (values.statements) {
    console.log(
      `\nstore statements: ${(counted / jobCount).toFixed(1)} per job (${counted} in all), the most frequent:`,
    );
    printTable([
      ['statement', 'count', 'per job', 'total ms'],
      ...[...statements.entries()]
        .sort((a, b) => b[1].n - a[1].n)
        .slice(0, 15)
        .map(([sql, s]) => [sql.slice(0, 90), String(s.n), (s.n / jobCount).toFixed(2), s.ms.toFixed(0)]),
    ]);
  }
  stopped = true;
  await Promise.race([Promise.all(loops), new Promise((r) => setTimeout(r, 3000))]);
} finally {
  stopped = true;
  await closeContext(ctx);
  await store.drop();
  cluster.stop();
}

/** Counts and times every statement that goes through `db` (and its transactions). */
function countStatements(db: Db, stats: Map<string, { n: number; ms: number }>): void {
  const timed = async <T>(label: string, run: () => Promise<T>): Promise<T> => {
    const at = performance.now();
    try {
      return await run();
    } finally {
      const key = label.replace(/\s+/g, ' ').slice(0, 120);
      const s = stats.get(key) ?? { n: 0, ms: 0 };
      s.n++;
      s.ms += performance.now() - at;
      stats.set(key, s);
    }
  };
  const counting = (q: Queryable): Queryable => ({
    query: <Row>(sql: string, params?: readonly unknown[]): Promise<QueryResult<Row>> =>
      timed(sql, () => q.query<Row>(sql, params)),
    exec: (sql: string) => timed(`EXEC ${sql}`, () => q.exec(sql)),
  });
  const plain = { query: db.query, exec: db.exec, transaction: db.transaction };
  const wrapped = counting(plain);
  db.query = wrapped.query;
  db.exec = wrapped.exec;
  db.transaction = (fn) => timed('(transaction)', () => plain.transaction((tx) => fn(counting(tx))));
}

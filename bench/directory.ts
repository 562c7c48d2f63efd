/**
 * What the gateway's node directory (packages/server/src/modules/nodes/directory.ts) costs with
 * many nodes: its once-a-second refresh (the calls recorded since the last one and every node's
 * open work count, two statements; every live node's routing columns every 30 s) and one routing lookup (`serving`, in memory), against the
 * per-request statement it replaced (the live nodes serving a model with a correlated count of
 * each one's open work). `--store postgres` starts a throwaway PostgreSQL (or set DATABASE_URL).
 * See bench/README.md.
 *
 * @example
 * npx tsx bench/directory.ts --nodes 1000 --work 10000
 */
import { cpus, loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { createContext, closeContext, loadConfig } from '@svc/server';
import { createTestStore } from '@svc/server/testing';
import { insertOrganization } from '../packages/server/src/modules/auth/store.js';
import { NODE_LIVE_SECONDS } from '../packages/server/src/modules/system/service.js';
import { percentile } from '../packages/server/src/modules/jobs/sla.js';
import { liveRoutingNodes, recentlySeenNodes } from '../packages/server/src/modules/nodes/store.js';
import { openWorkByNode } from '../packages/server/src/modules/work/store.js';
import { positiveInt, printTable } from './lib.js';
import { benchStore, STORE_OPTION } from './postgres.js';

const { values } = parseArgs({
  options: {
    nodes: { type: 'string', default: '1000' },
    work: { type: 'string', default: '10000' },
    rounds: { type: 'string', default: '50' },
    store: STORE_OPTION,
  },
});
const nodeCount = positiveInt('nodes', values.nodes);
const workCount = positiveInt('work', values.work);
const rounds = positiveInt('rounds', values.rounds);

const cluster = benchStore(values.store);
const store = await createTestStore();
const ctx = await createContext(
  loadConfig(
    { 'data-dir': store.dataDir, port: '0' },
    { SVC_LOG_LEVEL: 'silent', ...(store.databaseUrl ? { DATABASE_URL: store.databaseUrl } : {}) },
  ),
);

async function timed(run: () => Promise<unknown>): Promise<number[]> {
  const ms: number[] = [];
  for (let i = 0; i < rounds; i++) {
    const started = performance.now();
    await run();
    ms.push(performance.now() - started);
  }
  return ms.sort((a, b) => a - b);
}

try {
  await insertOrganization(ctx.db, { id: 'org_bench_directory', name: 'bench' });
  // Live nodes, a third of them serving tinyllama, in five countries; open work spread over them.
  await ctx.db.query(
    `INSERT INTO nodes (id, org_id, pubkey, country, region, models, last_seen)
     SELECT 'node_bench_' || i, 'org_bench_directory', lpad(to_hex(i), 64, '0'), (ARRAY['CA','US','FR','DE','JP'])[1 + i % 5],
            'r', CASE WHEN i % 3 = 0 THEN '{tinyllama}'::text[] ELSE '{phi-4}'::text[] END, now()
       FROM generate_series(1, $1) AS i`,
    [nodeCount],
  );
  await ctx.db.query(
    `INSERT INTO work_items (id, job_id, org_id, node_id, type, kind, payload, status, lease_expires_at)
     SELECT 'wrk_bench_' || i, 'job_bench_' || i, 'org_bench_directory', 'node_bench_' || (1 + i % $2), 'job', 1, '{}',
            CASE WHEN i % 4 = 0 THEN 'completed' ELSE 'leased' END, now() + interval '1 hour'
       FROM generate_series(1, $1) AS i`,
    [workCount, nodeCount],
  );
  // Calls spread over the last 20 s, as nodes heartbeating every 20 s would leave them.
  await ctx.db.query("UPDATE nodes SET last_seen = now() - random() * interval '20 seconds'");
  await ctx.db.query('ANALYZE');
  // The inserts announced every node: let the directory read them before timing it.
  await ctx.nodeDirectory.caughtUp();
  const refresh = await timed(() => ctx.nodeDirectory.refresh());
  const liveRows = await timed(() => liveRoutingNodes(ctx.db, NODE_LIVE_SECONDS));
  const recent = await timed(() => recentlySeenNodes(ctx.db, 2));
  const openRows = await timed(() => openWorkByNode(ctx.db));
  const serving = await timed(() => ctx.nodeDirectory.serving('tinyllama'));
  const old = await timed(() =>
    ctx.db.query(
      `SELECT n.id, n.org_id, n.country, n.region, n.gpu_model, (n.attestation_verified AND n.attestation_expires_at > now()) AS attestation_verified,
              (SELECT count(*) FROM work_items w WHERE w.node_id = n.id AND w.status IN ('leased', 'delivered'))::int AS open_work
         FROM nodes n
        WHERE $1 = ANY(n.models) AND n.last_seen > now() - make_interval(secs => $2)`,
      ['tinyllama', NODE_LIVE_SECONDS],
    ),
  );
  const candidates = (await ctx.nodeDirectory.serving('tinyllama')).length;
  const [load1] = loadavg();
  console.log(
    `node ${process.version}, ${cpus().length} CPUs, load ${load1?.toFixed(1)}, store ${ctx.db.kind}; ${nodeCount} live nodes (${candidates} serve tinyllama), ${workCount} work items (three quarters open); ${rounds} rounds each\n`,
  );
  const row = (name: string, ms: number[]) => [
    name,
    percentile(ms, 0.5).toFixed(3),
    percentile(ms, 0.95).toFixed(3),
    percentile(ms, 0.99).toFixed(3),
  ];
  printTable([
    ['', 'p50 ms', 'p95 ms', 'p99 ms'],
    row('directory refresh (once a second)', refresh),
    row('  of which: open work per node', openRows),
    row('  of which: calls recorded in the last 2 s', recent),
    row('  every 30 s instead: live nodes, routing columns', liveRows),
    row('directory lookup (per request)', serving),
    row('the statement it replaced (per request)', old),
  ]);
} finally {
  await closeContext(ctx);
  await store.drop();
  cluster.stop();
}

/**
 * Evidence throughput on the real recorder and store: events appended per second (one event per
 * transaction, as a state change writes them, and in batches), runs signed per second (closing
 * events + root + Ed25519 certificate), and bundles verified per second by the offline verifier
 * (`@svc/protocol/verify`, what `svc verify` runs). Set DATABASE_URL to run on PostgreSQL.
 *
 * @example
 * npx tsx bench/evidence.ts --runs 200 --events 10 --concurrency 8
 */
import { availableParallelism, cpus } from 'node:os';
import { parseArgs } from 'node:util';
import { verifyBundle } from '@svc/protocol/verify';
import { closeContext, createContext, loadConfig } from '@svc/server';
import { createTestStore } from '@svc/server/testing';
import { signup } from '../packages/server/src/modules/auth/service.js';
import { closeRun, openRun, recordEvents } from '../packages/server/src/modules/evidence/recorder.js';
import { evidenceBundle } from '../packages/server/src/modules/evidence/service.js';
import type { Principal } from '../packages/server/src/platform/principal.js';
import { positiveInt, printTable } from './lib.js';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '200' },
    events: { type: 'string', default: '10' },
    concurrency: { type: 'string', default: '8' },
    verify: { type: 'string', default: '500' },
  },
});
const runCount = positiveInt('runs', values.runs);
const eventsPerRun = positiveInt('events', values.events);
const concurrency = positiveInt('concurrency', values.concurrency);
const verifyCount = positiveInt('verify', values.verify);

const store = await createTestStore();
const ctx = await createContext(
  loadConfig(
    { 'data-dir': store.dataDir, port: '0' },
    { SVC_LOG_LEVEL: 'silent', ...(store.databaseUrl ? { DATABASE_URL: store.databaseUrl } : {}) },
  ),
);

async function inParallel(count: number, work: (i: number) => Promise<unknown>): Promise<number> {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) await work(next++);
    }),
  );
  return (performance.now() - started) / 1000;
}

const metadata = {
  node_id: 'node_bench',
  country: 'CA',
  region: 'ca-central',
  gpu_model: 'NVIDIA L4',
  reason: 'least loaded of 3 eligible nodes',
  units: 1234,
};

try {
  const buyer = await signup(ctx, { email: 'bench-evidence@example.test', password: 'benchmark password' });
  const principal: Principal = {
    kind: 'session',
    orgId: buyer.organization.id,
    buyerId: buyer.buyer_id,
    role: 'owner',
    scopes: ['buyer'],
  };
  const subject = (i: number) => `job_bench${String(i).padStart(21, '0')}`;
  const open = (i: number) =>
    ctx.db.transaction((tx) =>
      openRun(
        tx,
        {
          org_id: principal.orgId,
          buyer_id: principal.buyerId,
          subject_type: 'job',
          job_id: subject(i),
          summary: 'bench',
          jurisdiction: 'CA',
          policy_id: 'pol_bench',
          trust_tier: 'public',
          work_type: 'llm_inference',
        },
        [{ type: 'job.submitted', summary: 'submitted', metadata }],
      ),
    );

  console.log(
    `node ${process.version}, ${availableParallelism()} CPUs (${cpus()[0]?.model ?? 'unknown'}), store ${ctx.db.kind}`,
  );
  console.log(
    `${runCount} runs x ${eventsPerRun} events, ${concurrency} at a time; ${verifyCount} bundle verifications\n`,
  );

  const openSeconds = await inParallel(runCount, open);
  // One event per transaction, on different runs at once: how a busy marketplace writes them.
  const singleSeconds = await inParallel(runCount * eventsPerRun, (i) =>
    ctx.db.transaction(async (tx) => {
      await recordEvents(tx, subject(i % runCount), [
        { type: 'routing.decided', summary: `event ${i}`, metadata, causedBy: ['job.submitted'] },
      ]);
    }),
  );
  // Batches, as a receipt's transaction writes them (receipt, verified, charged, completed).
  const batchSeconds = await inParallel(runCount, (i) =>
    ctx.db.transaction(async (tx) => {
      await recordEvents(
        tx,
        subject(i),
        Array.from({ length: 4 }, (_, k) => ({
          type: `batch.${k}`,
          summary: 'batched',
          metadata,
          causedBy: ['job.submitted'],
        })),
      );
    }),
  );
  const signSeconds = await inParallel(runCount, (i) =>
    ctx.db.transaction(async (tx) => {
      await closeRun(
        tx,
        ctx.secrets,
        subject(i),
        [{ type: 'job.completed', summary: 'done', metadata }],
        'bench, completed',
      );
    }),
  );
  const bundle = (await evidenceBundle(ctx, principal, subject(0))).text;
  const first = await verifyBundle(bundle);
  if (!first.ok)
    throw new Error(`the bench bundle does not verify: ${JSON.stringify(first.checks.filter((c) => !c.ok))}`);
  const verifyStarted = performance.now();
  for (let i = 0; i < verifyCount; i++) await verifyBundle(bundle);
  const verifySeconds = (performance.now() - verifyStarted) / 1000;
  const eventsInBundle = eventsPerRun + 1 + 4 + 1;

  printTable([
    ['measure', 'count', 'seconds', 'per second'],
    ['runs opened (1 event each)', String(runCount), openSeconds.toFixed(2), (runCount / openSeconds).toFixed(0)],
    [
      'events appended, 1 per transaction',
      String(runCount * eventsPerRun),
      singleSeconds.toFixed(2),
      ((runCount * eventsPerRun) / singleSeconds).toFixed(0),
    ],
    [
      'events appended, 4 per transaction',
      String(runCount * 4),
      batchSeconds.toFixed(2),
      ((runCount * 4) / batchSeconds).toFixed(0),
    ],
    ['runs closed and signed', String(runCount), signSeconds.toFixed(2), (runCount / signSeconds).toFixed(0)],
    [
      `bundles verified (${eventsInBundle} events, ${bundle.length} bytes)`,
      String(verifyCount),
      verifySeconds.toFixed(2),
      (verifyCount / verifySeconds).toFixed(0),
    ],
  ]);
} finally {
  await closeContext(ctx);
  await store.drop();
}

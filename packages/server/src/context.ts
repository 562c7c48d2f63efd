/**
 * The composition root: builds every service and module port once at start-up (`createContext`)
 * and closes them (`closeContext`). Only the process entry points (server.ts, index.ts, the test
 * harness, the benches) import this file; modules and platform/ import the context's type from
 * `service-context.ts` (rule `context-is-the-root`).
 */
import pino, { type DestinationStream, type Logger } from 'pino';
import type { Config } from './platform/config.js';
import type { ServiceContext } from './service-context.js';
import { openDb } from './platform/db/index.js';
import { createMetrics } from './platform/metrics.js';
import { createLedger } from './modules/billing/service.js';
import { startBackgroundTasks } from './modules/scheduler/tasks.js';
import { createJobSignal } from './modules/work/waiters.js';
import { createAttestationVerifier, type AttestationVerifier } from './platform/attestation.js';
import { createObjectBlobStore, moveDbBlobsToObjects } from './platform/blobs.js';
import { createDbBus } from './platform/bus.js';
import { createObjectStore } from './platform/objects/index.js';
import { loadDashboardFiles } from './modules/dashboard/files.js';
import { createRateLimiter } from './platform/ratelimit/index.js';
import { loadPlatformSecrets } from './platform/secrets.js';
import { prepareVectorSearch } from './modules/knowledge/vector-search.js';
import { createGatewayHub } from './modules/gateway/hub.js';
import { createReservations } from './modules/billing/reservations.js';
import { newId } from './platform/ids.js';
import type { Resolve } from '@svc/protocol/egress';
import { createEgress } from './platform/egress.js';
import { requestLogView } from './platform/log-redact.js';
import { startPayoutSchedule } from './modules/payouts/service.js';
import { createPaymentProvider } from './platform/payments/index.js';
import { createKeyCache } from './modules/auth/key-cache.js';
import { createWriter } from './platform/writer.js';
import { createNodeDirectory } from './modules/nodes/directory.js';
import { openWorkByNode } from './modules/work/store.js';
import { jobCompletion } from './modules/jobs/completion.js';
import { requestCompletion } from './modules/gateway/completion.js';
import { assignOnSubmit, claimJobs, handOver, hasRoom, reserveWaitingNode } from './modules/scheduler/service.js';
import { jobEvidenceSubject } from './modules/jobs/evidence.js';
import { requestEvidenceSubject } from './modules/gateway/evidence-subject.js';
import { requestEvidenceEvents } from './modules/gateway/evidence-derived.js';
import { groundChat } from './modules/knowledge/retrieval.js';
import { resolveLogOrigin, type TransparencyLog } from './modules/log/service.js';
import { startLogSequencer } from './modules/log/sequencer.js';

/** Header and field names whose values are replaced by `[redacted]` in every log line. */
export const LOG_REDACT_PATHS = [
  'req.headers.authorization',
  'req.headers["x-api-key"]',
  'req.headers.cookie',
  'headers.authorization',
  'headers["x-api-key"]',
  '*.password',
  '*.api_key',
  '*.token',
  'password',
  'api_key',
  'token',
];

export function createLogger(config: Pick<Config, 'logLevel'>, stream?: DestinationStream): Logger {
  // `req` replaces Fastify's serializer: request URLs are logged with token-like query values redacted.
  return pino(
    {
      level: config.logLevel,
      redact: { paths: LOG_REDACT_PATHS, censor: '[redacted]' },
      serializers: { req: requestLogView },
    },
    stream,
  );
}

/**
 * Opens the store, applies migrations and loads the platform secrets.
 *
 * @example
 * const ctx = await createContext(loadConfig({}, process.env));
 */
export async function createContext(
  config: Config,
  options: {
    logStream?: DestinationStream;
    attestation?: AttestationVerifier;
    /** False: the periodic sweeps (leases, webhooks, signatures) run only when called (tests). */
    periodicTasks?: boolean;
    egressResolve?: Resolve;
  } = {},
): Promise<ServiceContext> {
  const log = createLogger(config, options.logStream);
  const db = await openDb(config);
  try {
    const secrets = await loadPlatformSecrets(db, config);
    const vectorSearch = await prepareVectorSearch(db, config.knowledge.vectorSearch);
    if (vectorSearch.mode === 'exact') {
      log.warn(
        { vector_search: 'exact', reason: vectorSearch.reason },
        `knowledge-base search is exact, not indexed: ${vectorSearch.reason ?? 'pgvector is not available'} (fine for small knowledge bases; install pgvector for large ones)`,
      );
    }
    const rateLimiter = createRateLimiter(config, {
      onError: (err) => log.warn({ err }, 'rate limiter: Redis unreachable, counting in memory'),
    });
    const bus = createDbBus(db);
    const jobSignal = await createJobSignal({ bus, db });
    const hub = await createGatewayHub({ bus, log });
    const objects = createObjectStore(config);
    await moveDbBlobsToObjects(db, objects, log);
    const keyCache = await createKeyCache({ db, bus, log });
    const nodeDirectory = await createNodeDirectory(
      { db, bus, log },
      {
        localOpen: () => hub.attempts.openPerNode,
        localWork: () => hub.attempts.openWorkIds(),
        openWork: (except) => openWorkByNode(db, except),
      },
    );
    const egress = createEgress({ allowPrivate: config.allowPrivateEgress, resolve: options.egressResolve });
    const metrics = createMetrics();
    const writer = createWriter({ db, log, flushMs: config.writer.flushMs });
    const reservations = createReservations({
      db,
      instanceId: newId('inst'),
      ttlMs: config.reservations.ttlMs,
      sliceCents: config.reservations.sliceCents,
      askWaitMs: config.reservations.askWaitMs,
      bus,
      metrics,
      log,
      writer,
    });
    await reservations.ready;
    const logOrigin = await resolveLogOrigin(db, config.log.origin, config.log.derivedOrigin);
    const transparencyLog: TransparencyLog = {
      origin: logOrigin,
      intervalMs: config.log.checkpointMs,
      // The lease outlives a few missed ticks, and is taken over within seconds of a kill -9.
      sequencer: startLogSequencer({
        db,
        log,
        secrets,
        origin: logOrigin,
        intervalMs: config.log.checkpointMs,
        leaseMs: Math.max(3000, 3 * config.log.checkpointMs),
        holder: newId('inst'),
      }),
    };
    const ctx: ServiceContext = {
      config,
      db,
      log,
      secrets,
      metrics,
      rateLimiter,
      ledger: createLedger(db, reservations),
      bus,
      blobs: createObjectBlobStore(objects),
      objects,
      attestation: options.attestation ?? createAttestationVerifier(config.tee),
      payments: createPaymentProvider(config, secrets, egress),
      dashboard: loadDashboardFiles(config.dashboardDir),
      vectorSearch,
      jobSignal: jobSignal.signal,
      hub,
      keyCache,
      reservations,
      nodeDirectory,
      writer,
      egress,
      completions: { job: jobCompletion, direct: requestCompletion, claimJobs },
      submitAssignment: { reserveWaitingNode, hasRoom, assignOnSubmit, handOver },
      evidenceSubjects: {
        job: jobEvidenceSubject,
        request: requestEvidenceSubject,
        requestEvents: requestEvidenceEvents,
      },
      grounding: { groundChat },
      transparencyLog,
      stopBackground: async () => undefined,
      startedAt: new Date(),
    };
    const stopTasks = startBackgroundTasks(ctx, { periodic: options.periodicTasks });
    const stopPayouts = startPayoutSchedule(ctx);
    // `svc keys rotate` (another process) announces a new platform key; sign with it at once.
    const stopKeyWatch = await bus.subscribe('keys', (payload) => {
      if (payload === 'platform')
        void secrets.reload().catch((err: unknown) => log.error({ err }, 'could not reload the platform key'));
    });
    ctx.stopBackground = async () => {
      await stopTasks();
      await stopPayouts();
      await stopKeyWatch();
      await jobSignal.close();
      await hub.close();
      await keyCache.close();
      await reservations.close();
      await nodeDirectory.close();
      await transparencyLog.sequencer.stop();
    };
    return ctx;
  } catch (err) {
    await db.close();
    throw err;
  }
}

export async function closeContext(ctx: ServiceContext): Promise<void> {
  // Nothing queued is lost on shutdown: its flush commits before anything else stops.
  await ctx.writer.close();
  await ctx.stopBackground();
  await ctx.rateLimiter.close();
  await ctx.egress.close();
  await ctx.db.close();
}

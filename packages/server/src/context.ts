import pino, { type DestinationStream, type Logger } from 'pino';
import type { Config } from './platform/config.js';
import { openDb, type Db } from './platform/db/index.js';
import { createMetrics, type Metrics } from './platform/metrics.js';
import { createLedger, type Ledger } from './modules/billing/service.js';
import { startBackgroundTasks } from './modules/scheduler/tasks.js';
import { createJobSignal, type JobSignal } from './modules/work/waiters.js';
import { createAttestationVerifier, type AttestationVerifier } from './platform/attestation.js';
import { createObjectBlobStore, moveDbBlobsToObjects, type BlobStore } from './platform/blobs.js';
import { createDbBus, type Bus } from './platform/bus.js';
import { createObjectStore, type ObjectStore } from './platform/objects/index.js';
import { loadDashboardFiles, type DashboardFiles } from './modules/dashboard/files.js';
import { createRateLimiter, type RateLimiter } from './platform/ratelimit/index.js';
import { loadPlatformSecrets, type PlatformSecrets } from './platform/secrets.js';
import { prepareVectorSearch, type VectorSearch } from './modules/knowledge/vector-search.js';
import { createGatewayHub, type GatewayHub } from './modules/gateway/hub.js';
import { createReservations, type Reservations } from './modules/billing/reservations.js';
import { newId } from './platform/ids.js';
import type { Resolve } from '@svc/protocol/egress';
import { createEgress, type Egress } from './platform/egress.js';
import { requestLogView } from './platform/log-redact.js';
import { startPayoutSchedule } from './modules/payouts/service.js';
import { createPaymentProvider, type PaymentProvider } from './platform/payments/index.js';
import { createKeyCache, type KeyCache } from './modules/auth/key-cache.js';
import { createWriter, type Writer } from './platform/writer.js';
import { createNodeDirectory, type NodeDirectory } from './modules/nodes/directory.js';
import type { WorkOwners } from './modules/work/completion.js';
import { openWorkByNode } from './modules/work/store.js';
import { jobCompletion } from './modules/jobs/completion.js';
import { requestCompletion } from './modules/gateway/completion.js';
import { assignOnSubmit, claimJobs, handOver, hasRoom, reserveWaitingNode } from './modules/scheduler/service.js';
import type { SubmitAssignment } from './modules/jobs/assignment.js';
import type { EvidenceSubjects } from './modules/evidence/subjects.js';
import { jobEvidenceSubject } from './modules/jobs/evidence.js';
import { requestEvidenceSubject } from './modules/gateway/evidence-subject.js';
import { requestEvidenceEvents } from './modules/gateway/evidence-derived.js';
import type { ChatGrounding } from './modules/gateway/grounding.js';
import { groundChat } from './modules/knowledge/retrieval.js';
import { resolveLogOrigin, type TransparencyLog } from './modules/log/service.js';
import { startLogSequencer } from './modules/log/sequencer.js';

/** Everything a route or service may use, built once at start-up and handed down. */
export interface ServiceContext {
  config: Config;
  db: Db;
  log: Logger;
  secrets: PlatformSecrets;
  metrics: Metrics;
  rateLimiter: RateLimiter;
  ledger: Ledger;
  bus: Bus;
  blobs: BlobStore;
  /** Large files as streams (capture-set uploads): a data-dir directory or S3 (platform/objects/). */
  objects: ObjectStore;
  attestation: AttestationVerifier;
  /** Payouts and top-ups: Stripe, or the offline `local` provider (docs/payouts.md). */
  payments: PaymentProvider;
  /** The built web dashboard, read once at start-up (empty when not built). */
  dashboard: DashboardFiles;
  /** How knowledge-base chunks are searched on this store: pgvector HNSW, or exact (logged at start). */
  vectorSearch: VectorSearch;
  /** Wakes long-polling nodes when a job becomes eligible on any instance. */
  jobSignal: JobSignal;
  /** Carries gateway work's stream events and completions to the request that waits for them. */
  hub: GatewayHub;
  /** API keys checked in memory, invalidated through the bus on revoke, role or membership change. */
  keyCache: KeyCache;
  /** This instance's credit reservations per organization: the 402 decision in memory (billing/reservations.ts). */
  reservations: Reservations;
  /** The nodes as routing reads them, without a statement per request (nodes/directory.ts). */
  nodeDirectory: NodeDirectory;
  /** The group-commit writer: records written behind the answer, many requests per transaction. */
  writer: Writer;
  /** Every outbound request to a URL a client gave goes through this (the SSRF guard). */
  egress: Egress;
  /** What jobs and the gateway do when a work item's attempt ends, called by the node protocol (work/completion.ts). */
  completions: WorkOwners;
  /** A job's assignment at its submission to a node waiting here: the scheduler's, for jobs (jobs/assignment.ts). */
  submitAssignment: SubmitAssignment;
  /** The subjects of evidence runs as bundles show them: jobs' and the gateway's (evidence/subjects.ts). */
  evidenceSubjects: EvidenceSubjects;
  /** A chat grounded in a knowledge base: knowledge's, for the gateway (gateway/grounding.ts). */
  grounding: ChatGrounding;
  /** The transparency log's origin, checkpoint interval and this instance's sequencer loop (modules/log). */
  transparencyLog: TransparencyLog;
  /** Stops background tasks (lease sweeper, webhook sender) and subscriptions. */
  stopBackground: () => Promise<void>;
  startedAt: Date;
}

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
      completions: { job: jobCompletion, request: requestCompletion, claimJobs },
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

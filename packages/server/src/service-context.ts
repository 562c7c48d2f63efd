import type { PlatformServices } from './platform/services.js';
import type { Ledger } from './modules/billing/service.js';
import type { Reservations } from './modules/billing/reservations.js';
import type { JobSignal } from './modules/work/waiters.js';
import type { WorkOwners } from './modules/work/completion.js';
import type { DashboardFiles } from './modules/dashboard/files.js';
import type { VectorSearch } from './modules/knowledge/vector-search.js';
import type { GatewayHub } from './modules/gateway/hub.js';
import type { ChatGrounding } from './modules/gateway/grounding.js';
import type { KeyCache } from './modules/auth/key-cache.js';
import type { NodeDirectory } from './modules/nodes/directory.js';
import type { SubmitAssignment } from './modules/jobs/assignment.js';
import type { EvidenceSubjects } from './modules/evidence/subjects.js';
import type { TransparencyLog } from './modules/log/service.js';

/**
 * The module half of the service context: state a module owns, and the ports a lower module
 * defines and an upper one implements (registered by `context.ts`, so that neither imports the
 * other). Types only.
 */
export interface ModulePorts {
  ledger: Ledger;
  /** This instance's credit reservations per organization: the 402 decision in memory (billing/reservations.ts). */
  reservations: Reservations;
  /** Wakes long-polling nodes when a job becomes eligible on any instance. */
  jobSignal: JobSignal;
  /** Carries gateway work's stream events and completions to the request that waits for them. */
  hub: GatewayHub;
  /** API keys checked in memory, invalidated through the bus on revoke, role or membership change. */
  keyCache: KeyCache;
  /** The nodes as routing reads them, without a statement per request (nodes/directory.ts). */
  nodeDirectory: NodeDirectory;
  /** The built web dashboard, read once at start-up (empty when not built). */
  dashboard: DashboardFiles;
  /** How knowledge-base chunks are searched on this store: pgvector HNSW, or exact (logged at start). */
  vectorSearch: VectorSearch;
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
}

/**
 * Everything a route or service may use, built once at start-up by `createContext` (`context.ts`,
 * the composition root) and handed down. Modules import this file, never `context.ts`
 * (rule `context-is-the-root` in .dependency-cruiser.cjs).
 */
export interface ServiceContext extends PlatformServices, ModulePorts {}

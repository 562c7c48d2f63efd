import type { Queryable } from '../../platform/db/index.js';
import type { DerivedBatch } from './recorder.js';

/**
 * What evidence asks of the modules whose runs it reports on: the subject of a run as its bundle
 * shows it (`job` section). Jobs implement `job` (jobs/evidence.ts), the gateway `request`
 * (gateway/evidence-subject.ts); `context.ts` registers both at start-up as `ctx.evidenceSubjects`,
 * so that evidence, which jobs and the gateway record into, imports neither of them.
 *
 * @example
 * const view = await ctx.evidenceSubjects.job(ctx.db, principal.orgId, run.job_id);
 */
export interface EvidenceSubjects {
  /** The job's view (as `GET /api/v1/jobs/{id}` shows it), or undefined when the organization has none. */
  job(db: Queryable, orgId: string, jobId: string): Promise<Record<string, unknown> | undefined>;
  /** The gateway request's summary (`type: 'request'`), or undefined when there is no such request. */
  request(db: Queryable, requestId: string): Promise<Record<string, unknown> | undefined>;
  /**
   * The events of a gateway request whose run stores none (DESIGN.md section 11, revised
   * 2026-11-27), derived from its records; undefined when its events are rows.
   */
  requestEvents(db: Queryable, requestId: string): Promise<DerivedBatch[] | undefined>;
}

import type { ServiceContext } from '../../service-context.js';
import type { Queryable } from '../../platform/db/index.js';
import type { EvidenceEvent } from '../evidence/recorder.js';
import type { NodeRow } from '../nodes/store.js';
import type { Handoff } from '../work/handoff.js';
import type { WorkRow } from '../work/store.js';
import type { JobRow } from './store.js';

/**
 * A job's assignment at its submission (DESIGN.md section 8: matching in memory on the
 * instance), as the submission asks for it: the scheduler implements it (`scheduler/service.ts`)
 * and `context.ts` registers it as `ctx.submitAssignment`, so jobs does not import the scheduler
 * (which reads jobs' rows and states: it sits above).
 */
export interface SubmitAssignment {
  /** The longest-waiting poll of this process whose node may take `job`, taken out of the waiters. */
  reserveWaitingNode(
    ctx: ServiceContext,
    job: Pick<JobRow, 'kind' | 'execution_pool' | 'spec' | 'max_price_micro_per_unit'>,
  ): { node: NodeRow; handoff: Handoff } | undefined;
  /** Whether the node has room for one more work item (read in the caller's transaction). */
  hasRoom(tx: Queryable, node: NodeRow): Promise<boolean>;
  /** Assigns the job the submission has just queued in `tx` to the reserved node: its work and routing events. */
  assignOnSubmit(
    ctx: ServiceContext,
    tx: Queryable,
    job: JobRow,
    node: NodeRow,
  ): Promise<{ work: WorkRow; evidence: EvidenceEvent[] } | undefined>;
  /** Gets committed work to the poll reserved for it (or back to the node's next poll). */
  handOver(ctx: ServiceContext, work: WorkRow, handoff: Handoff): Promise<void>;
}

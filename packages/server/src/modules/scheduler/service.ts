import type { ServiceContext } from '../../service-context.js';
import type { Queryable } from '../../platform/db/index.js';
import { captureWorkPayload, noteJobAssigned } from '../capture/processing.js';
import { newId } from '../../platform/ids.js';
import { routed } from '../evidence/events.js';
import { recordEvents, type EvidenceEvent } from '../evidence/recorder.js';
import { addJobEvent, moveJob, type JobRow } from '../jobs/store.js';
import { isAttested, type NodeRow } from '../nodes/store.js';
import type { Handoff } from '../work/handoff.js';
import { askingPrice, unmetConstraint } from '../jobs/matching.js';
import { lockStillPending, pendingJobs } from './store.js';
import { countOpenWork, insertWork, undispatchWork, type WorkRow } from '../work/store.js';

/** How many pending jobs one claim looks at before giving up for this poll. */
const CLAIM_WINDOW = 200;

/** The matching view of a job row. */
export function matchJob(job: Pick<JobRow, 'kind' | 'execution_pool' | 'spec' | 'max_price_micro_per_unit'>) {
  return {
    kind: job.kind,
    execution_pool: job.execution_pool,
    model: job.spec.model,
    strict_jurisdiction: job.spec.strict_jurisdiction,
    region: job.spec.region,
    green_only: job.spec.green_only,
    min_reputation: job.spec.min_reputation,
    required_capabilities: job.spec.required_capabilities,
    image: job.spec.image ?? null,
    network: job.spec.network ?? null,
    max_price_micro_per_unit: job.max_price_micro_per_unit,
  };
}

/** What the oci runner needs of a buyer-code job: its image, limits and network grant, when asked. */
function containerFields(s: JobRow['spec']): Record<string, unknown> {
  return {
    ...(s.image === undefined ? {} : { image: s.image }),
    ...(s.memory_mb === undefined ? {} : { memory_mb: s.memory_mb }),
    ...(s.cpus === undefined ? {} : { cpus: s.cpus }),
    ...(s.pids === undefined ? {} : { pids: s.pids }),
    ...(s.network === undefined ? {} : { network: s.network }),
  };
}

async function payloadOf(ctx: ServiceContext, db: Queryable, job: JobRow): Promise<Record<string, unknown>> {
  const s = job.spec;
  if (s.capture_set_id)
    return { ...(await captureWorkPayload(ctx, db, s.capture_set_id, s.timeout_seconds)), ...containerFields(s) };
  if (job.kind === 1) return { model: s.model, inputs: s.inputs ?? [] };
  if (job.kind === 2) return { model: s.model, inputs: s.inputs ?? [] };
  if (job.kind === 3) return { model: s.model, payload_url: s.payload_url };
  if (job.kind === 4) return { model: s.model, prompts: s.inputs ?? [] };
  if (job.kind === 9) return { ...(s.repository_work ?? {}), timeout_seconds: s.timeout_seconds };
  return {
    runner_args: s.runner_args,
    timeout_seconds: s.timeout_seconds,
    ...containerFields(s),
    inputs: s.inputs,
    payload_url: s.payload_url,
  };
}

/**
 * Assigns up to `max` pending jobs this node is eligible for (every constraint of DESIGN.md
 * section 8), oldest first; `noneEligible` when it had room and no pending job fits it. Jobs
 * are locked with SKIP LOCKED, so two nodes or two server instances never take the same job; the
 * job's state guard makes a double assignment impossible.
 */
export async function claimJobs(
  ctx: ServiceContext,
  node: NodeRow,
  max: number,
): Promise<{ work: WorkRow[]; noneEligible: boolean }> {
  return ctx.db.transaction(async (tx) => {
    const free = Math.min(max, node.max_concurrency - (await countOpenWork(tx, node.id)));
    if (free <= 0) return { work: [], noneEligible: false };
    const pools = isAttested(node) ? ['public', 'sovereign'] : ['public'];
    // Match on a snapshot, then lock only the chosen jobs: cheap, and SKIP LOCKED keeps two
    // claimers from waiting on each other. The window bounds how far back a node looks.
    const eligible = (await pendingJobs(tx, pools, CLAIM_WINDOW)).filter(
      (job) => unmetConstraint(matchJob(job), node) === undefined,
    );
    if (eligible.length === 0) return { work: [], noneEligible: true };
    // Other claimers may hold the first choices: walk on through the eligible list, a slice at a time.
    const candidates: JobRow[] = [];
    // Lock exactly as many as still wanted, so no claimer holds rows it will not use.
    for (let at = 0; at < eligible.length && candidates.length < free;) {
      const want = free - candidates.length;
      candidates.push(
        ...(await lockStillPending(
          tx,
          eligible.slice(at, at + want).map((j) => j.id),
        )),
      );
      at += want;
    }
    const claimed: WorkRow[] = [];
    for (const job of candidates) {
      if (claimed.length >= free) break;
      const assigned = await assignJob(
        ctx,
        tx,
        job,
        node,
        `${node.id} polled for work and meets every constraint of the policy; the oldest eligible pending job goes first`,
      );
      if (!assigned) continue;
      await recordEvents(tx, job.id, assigned.evidence);
      claimed.push(assigned.work);
    }
    return { work: claimed, noneEligible: false };
  });
}

/**
 * Assigns a pending job the caller's transaction holds (locked, or queued by it) to `node`: the
 * job moves to `assigned` (its state guard refuses a job that is no longer pending), its work item
 * is leased, and the job event written. Returns the work and the run's routing events, which the
 * caller records (or opens the run with); undefined when the job was no longer pending.
 */
export async function assignJob(
  ctx: ServiceContext,
  tx: Queryable,
  job: JobRow,
  node: NodeRow,
  reason: string,
): Promise<{ work: WorkRow; evidence: EvidenceEvent[] } | undefined> {
  const workId = newId('wrk');
  const moved = await moveJob(tx, job.id, 'assigned', {
    node_id: node.id,
    work_id: workId,
    attempts: job.attempts + 1,
  });
  if (!moved) return undefined;
  const work = await insertWork(
    tx,
    {
      id: workId,
      job_id: job.id,
      org_id: job.org_id,
      node_id: node.id,
      type: 'job',
      kind: job.kind,
      model: job.spec.model,
      payload: await payloadOf(ctx, tx, job),
      stream: false,
      price_micro_per_unit: askingPrice(node, job.kind),
    },
    ctx.config.leaseSeconds,
  );
  await addJobEvent(tx, job.id, 'job_assigned', {
    node_id: node.id,
    region: node.region,
    country: node.country,
    work_id: workId,
    attempt: job.attempts + 1,
    price_micro_per_unit: work.price_micro_per_unit,
    latency_ms: moved.assigned_at && moved.pending_at ? moved.assigned_at.getTime() - moved.pending_at.getTime() : null,
  });
  if (job.spec.capture_set_id)
    await noteJobAssigned(tx, job.spec.capture_set_id, { job_id: job.id, node_id: node.id, work_id: workId });
  const evidence = routed(
    node,
    { reason, reputation: node.reputation, price_micro_per_unit: work.price_micro_per_unit },
    {
      type: 'job.assigned',
      work_id: workId,
      attempt: job.attempts + 1,
      lease_expires_at: work.lease_expires_at.toISOString(),
    },
  );
  return { work, evidence };
}

/** Whether `node` may take `job`: its pool (sovereign needs a live attestation) and every constraint. */
export function mayTake(job: Parameters<typeof matchJob>[0], node: NodeRow): boolean {
  if (job.execution_pool === 'sovereign' && !isAttested(node)) return false;
  return unmetConstraint(matchJob(job), node) === undefined;
}

/**
 * The longest-waiting poll of this process whose node may take `job`, taken out of the waiters
 * (DESIGN.md section 8: matching in memory on the instance). The job's submission then assigns it
 * to that node in its own transaction ({@link assignOnSubmit}) and hands the work over after the
 * commit ({@link handOver}): no bus message, no wake-up, no claim. Undefined when none waits here.
 */
export function reserveWaitingNode(
  ctx: Pick<ServiceContext, 'jobSignal'>,
  job: Parameters<typeof matchJob>[0],
): { node: NodeRow; handoff: Handoff } | undefined {
  return ctx.jobSignal.reserveFor(
    (node): node is NodeRow =>
      typeof node.id === 'string' && 'max_concurrency' in node && mayTake(job, node as NodeRow),
  );
}

/** Whether the node has room for one more work item (read in the caller's transaction). */
export async function hasRoom(tx: Queryable, node: NodeRow): Promise<boolean> {
  return (await countOpenWork(tx, node.id)) < node.max_concurrency;
}

/**
 * Assigns a job its submission has just queued (in `tx`) to the reserved waiting node, which
 * {@link hasRoom} said has room: read before the job is queued, so that its `pending_at ->
 * assigned_at` spans only the assignment itself.
 */
export async function assignOnSubmit(
  ctx: ServiceContext,
  tx: Queryable,
  job: JobRow,
  node: NodeRow,
): Promise<{ work: WorkRow; evidence: EvidenceEvent[] } | undefined> {
  return assignJob(
    ctx,
    tx,
    job,
    node,
    `${node.id} was waiting for work and meets every constraint of the policy; the job went to it as it was queued`,
  );
}

/**
 * Gets committed work to the poll reserved for it; when that poll ended meanwhile (its node hung
 * up), the work goes back to the node's next poll (`dispatched_at` cleared) with a `node:<id>`
 * message to whichever instance holds that poll.
 */
export async function handOver(ctx: ServiceContext, work: WorkRow, handoff: Handoff): Promise<void> {
  if (handoff.deliver([work])) return;
  await undispatchWork(ctx.db, work.id);
  await ctx.bus.publish('jobs', `node:${work.node_id}`);
}

/**
 * A signalled pending job, matched in memory to a poll waiting in this process: locks it (SKIP
 * LOCKED: another instance may be taking it), assigns it to the node when it has room, and hands
 * the work over after the commit. Otherwise gives the poll back (it looks in the store and waits
 * on) and says why. One transaction, no search through the pending jobs.
 */
export async function assignSignalledJob(
  ctx: ServiceContext,
  jobId: string,
  node: NodeRow,
  handoff: Handoff,
): Promise<'assigned' | 'full' | 'gone'> {
  let outcome: 'full' | 'gone' = 'gone';
  let work: WorkRow | undefined;
  try {
    work = await ctx.db.transaction(async (tx) => {
      const [job] = await lockStillPending(tx, [jobId]);
      if (!job || !mayTake(job, node)) return undefined;
      if (!(await hasRoom(tx, node))) {
        outcome = 'full';
        return undefined;
      }
      const assigned = await assignJob(
        ctx,
        tx,
        job,
        node,
        `${node.id} was waiting for work and meets every constraint of the policy; the job went to it as it was signalled`,
      );
      if (!assigned) return undefined;
      await recordEvents(tx, job.id, assigned.evidence);
      return assigned.work;
    });
  } finally {
    if (!work) handoff.release();
  }
  if (!work) return outcome;
  await handOver(ctx, work, handoff);
  return 'assigned';
}

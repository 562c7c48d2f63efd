import {
  estimateCost,
  executionPool,
  findJobKind,
  findModel,
  JOB_KINDS,
  MICRO_PER_CAD,
  microToCad,
} from '@svc/protocol';
import type { ServiceContext } from '../../service-context.js';
import type { Queryable } from '../../platform/db/index.js';
import { ApiError } from '../../platform/errors.js';
import { newId } from '../../platform/ids.js';
import type { Principal } from '../../platform/principal.js';
import { transactionRecord } from '../billing/service.js';
import { ledgerOfRef } from '../billing/store.js';
import { capabilityMet, floorPriceMicroPerUnit, unmetConstraint } from './matching.js';
import type { MatchJob, MatchNode } from './matching.js';
import { liveAttestedNodes } from '../nodes/store.js';
import { cancelOpenWork, type WorkRow } from '../work/store.js';
import { NODE_LIVE_SECONDS } from '../system/service.js';
import { isCaptureKind, releaseFromJob, takeForJob } from '../capture/processing.js';
import { enqueueTerminalWebhook } from './delivery.js';
import { closeJobRun, endedWithoutResult, openJobRun } from './evidence.js';
import { isTerminal, type JobStatus } from './states.js';
import * as store from './store.js';
import type { Static } from '@sinclair/typebox';
import type { CreateJobRequest, EstimateRequest } from './schemas.js';
import { jobEstimate, type JobEstimate } from './estimate.js';
import { countInputs } from './inputs.js';
import { jobView } from './view.js';
import { readWorkResult } from '../work/results.js';

const DEFAULT_MODEL: Record<number, string> = {
  1: 'tinyllama',
  2: 'all-MiniLM-L6-v2',
  3: 'whisper-base',
  4: 'sdxl-turbo',
};
/** Kinds whose program is the buyer's or runs on the buyer's data in the oci runner's containers. */
const BUYER_CODE_KINDS = new Set([5, 6, 7, 8, 10]);
const MODEL_TYPE: Record<number, string> = { 1: 'chat', 2: 'embeddings', 3: 'transcription', 4: 'image' };

const bad = (path: string, message: string) =>
  new ApiError('invalid_request', `${path.slice(1)} ${message}`, [{ path, message }]);

/**
 * `POST /api/v1/marketplace/estimate`: the estimate of a job from its fields, counting its inputs
 * when the request names them (`inline_text` or `payload_url`, read as a submission reads them):
 * the same figure the submission answers as `estimated_cost` (jobs/estimate.ts).
 */
export async function estimate(ctx: ServiceContext, body: Static<typeof EstimateRequest>) {
  const { max_micro: _exact, ...view } = jobEstimate(body.kind, body, await countInputs(ctx, body, false));
  return view;
}

export function pricing() {
  return {
    currency: 'CAD',
    kinds: JOB_KINDS.map((k) => ({
      kind: k.kind,
      name: k.name,
      unit: k.unit,
      execution_pool: k.pool,
      per_units: k.price.per_units,
      min_price_per_unit: k.price.min_micro_cad / k.price.per_units / MICRO_PER_CAD,
      max_price_per_unit: k.price.max_micro_cad / k.price.per_units / MICRO_PER_CAD,
      estimate_input: k.estimate_input,
    })),
  };
}

/**
 * Validates and submits a job: checks every field, fetches `payload_url` documents for text kinds
 * (so a bad URL is a 400 now, not a failed job later), takes the budget from this instance's
 * credit reservation (402 when short, decided in memory before any transaction), then holds it
 * (drawn from that reservation) and queues the job, all in one transaction. When a node that may take it is waiting in this process,
 * the same transaction assigns the job to it and the work is handed to its poll after the commit;
 * otherwise the job's message wakes a node (on any instance) to claim it.
 */
export async function createJob(ctx: ServiceContext, principal: Principal, body: Static<typeof CreateJobRequest>) {
  const kind = findJobKind(body.kind);
  if (!kind) throw bad('/kind', `must be one of ${JOB_KINDS.map((k) => k.kind).join(', ')}`);
  if (body.currency !== 'CAD') throw bad('/currency', "must be 'CAD' (prices and credits are in Canadian dollars)");
  const budgetCents = Math.round(body.budget * 100);
  if (Math.abs(budgetCents - body.budget * 100) > 1e-6 || budgetCents < 1)
    throw bad('/budget', 'must be a positive amount of whole cents');
  const maxPriceMicro = body.max_price_per_unit * MICRO_PER_CAD;
  if (maxPriceMicro < floorPriceMicroPerUnit(body.kind)) {
    throw bad(
      '/max_price_per_unit',
      `is below the lowest price any node asks for ${kind.name} (${floorPriceMicroPerUnit(body.kind) / MICRO_PER_CAD} CAD per ${kind.unit})`,
    );
  }
  const model = body.kind <= 4 ? (body.model ?? DEFAULT_MODEL[body.kind] ?? null) : null;
  if (body.kind === 9)
    throw bad(
      '/kind',
      'repository_work jobs are created by work orders and preflights (POST /api/v1/work/orders, POST /api/v1/work/repositories/{id}/preflight)',
    );
  if (body.kind <= 4 && (!model || findModel(model)?.type !== MODEL_TYPE[body.kind]))
    throw bad('/model', `must be a ${MODEL_TYPE[body.kind]} model of the catalogue`);
  if (body.kind > 4 && body.model !== undefined) throw bad('/model', `is not used by ${kind.name} jobs`);
  const probe: MatchNode = {
    country: null,
    region: null,
    attestation_verified: true,
    green: true,
    reputation: 100,
    capabilities: [],
    gpu_model: null,
    cpu_cores: 0,
    ram_bytes: 0,
    vram_bytes: 0,
    models: [],
    price_micro_per_unit: {},
  };
  (body.required_capabilities ?? []).forEach((c, i) => {
    if (capabilityMet(probe, c) === undefined)
      throw bad(
        `/required_capabilities/${i}`,
        `'${c}' is not a capability (cpu, gpu, process, min_cpu_cores:<n>, min_ram_gb:<n>, min_vram_gb:<n>, model:<id>)`,
      );
  });
  for (const field of ['delivery_artifact_put_url', 'delivery_manifest_put_url', 'delivery_webhook_url'] as const) {
    const url = body[field];
    if (url) await ctx.egress.checkUrl(url, `/${field}`);
  }
  if (body.delivery_mode === 'put' && !body.delivery_artifact_put_url)
    throw bad('/delivery_artifact_put_url', "is required when delivery_mode is 'put'");
  // Text inputs and a transcription's audio are read now (a bad URL or a file that is not audio is
  // a 400 or 415 now, not a failed job later) and counted by the estimate.
  const counted = await countInputs(ctx, body, true);
  const inputs = counted.inputs ? [...counted.inputs] : undefined;
  if (isCaptureKind(body.kind)) {
    if (!body.capture_set_id)
      throw bad('/capture_set_id', `is required for ${kind.name} (the ready capture set to process)`);
    if (body.runner_args)
      throw bad('/runner_args', `is not used by ${kind.name}: the node runs the program its operator set for the kind`);
  } else if (body.kind > 4 && !body.runner_args) {
    throw bad('/runner_args', `is required for ${kind.name} (the program and its arguments)`);
  }
  if (body.capture_set_id !== undefined && !isCaptureKind(body.kind))
    throw bad('/capture_set_id', `is used by scene_reconstruction (8) and data_processing (10) jobs only`);
  // 'none' is the schema's default, filled in when the field is absent: only 'egress' asks for a network.
  if (body.network === 'egress' && !BUYER_CODE_KINDS.has(body.kind))
    throw bad(
      '/network',
      `is used by jobs running buyer code (kinds 5, 6, 7, 8 and 10), not ${kind.name}${body.kind === 9 ? ': the capsule reaches nothing, the node fetches the repository itself' : ''}`,
    );
  const cost = jobEstimate(body.kind, body, counted);
  refuseBudgetBelow(cost, budgetCents, maxPriceMicro);
  const spec: store.JobSpec = {
    model,
    region: body.region ?? null,
    strict_jurisdiction: body.strict_jurisdiction ?? null,
    delivery_mode: body.delivery_mode ?? 'inline',
    inline_text: body.inline_text ?? null,
    output_file: body.output_file ?? null,
    payload_url: body.payload_url ?? null,
    delivery_artifact_put_url: body.delivery_artifact_put_url ?? null,
    delivery_manifest_put_url: body.delivery_manifest_put_url ?? null,
    delivery_webhook_url: body.delivery_webhook_url ?? null,
    min_reputation: body.min_reputation ?? null,
    green_only: body.green_only ?? false,
    requires_tee: body.requires_tee ?? false,
    required_capabilities: body.required_capabilities ?? [],
    runner_args: body.runner_args ?? [],
    timeout_seconds: body.timeout_seconds ?? 300,
    ...(body.image === undefined ? {} : { image: body.image }),
    ...(body.memory_mb === undefined ? {} : { memory_mb: body.memory_mb }),
    ...(body.cpus === undefined ? {} : { cpus: body.cpus }),
    ...(body.pids === undefined ? {} : { pids: body.pids }),
    ...(body.network === 'egress' ? { network: 'egress' as const } : {}),
    estimates: Object.fromEntries(
      Object.entries(body).filter(([k, v]) => k.startsWith('estimated_') && typeof v === 'number'),
    ) as Record<string, number>,
    estimated_units: cost.units,
    ...(inputs ? { inputs } : {}),
    ...(counted.audioMs !== undefined ? { measured_audio_ms: counted.audioMs } : {}),
    ...(body.capture_set_id ? { capture_set_id: body.capture_set_id } : {}),
  };
  const jobId = newId('job');
  const pool = executionPool({ kind: body.kind, requires_tee: body.requires_tee });
  if (pool === 'sovereign')
    await refuseWithoutSovereignNode(ctx, {
      kind: body.kind,
      execution_pool: pool,
      model,
      strict_jurisdiction: spec.strict_jurisdiction,
      region: spec.region,
      green_only: spec.green_only,
      min_reputation: spec.min_reputation,
      required_capabilities: spec.required_capabilities,
      max_price_micro_per_unit: maxPriceMicro,
    });
  const estimatedDurationMs =
    body.estimated_duration_ms ?? (body.estimated_gpu_seconds ? body.estimated_gpu_seconds * 1000 : 60_000);
  // The 402 is decided in memory, as the gateway's: the budget is taken from this instance's
  // credit reservation of the organization (a statement only when it must grow), and the hold
  // below draws it from that reservation. Concurrent submitters and gateway requests of the
  // organization count on the same cents, so none of them finds its cents drawn by another.
  const ticket = await ctx.reservations.take(principal.orgId, budgetCents);
  // A poll waiting in this process whose node may take the job gets it in this transaction.
  const scheduler = ctx.submitAssignment;
  const waiting = scheduler.reserveWaitingNode(ctx, {
    kind: body.kind,
    execution_pool: pool,
    spec,
    max_price_micro_per_unit: maxPriceMicro,
  });
  let assigned: WorkRow | undefined;
  let job: store.JobRow;
  try {
    job = await ctx.db.transaction(async (tx) => {
      // The capture set first: another organization's is a 404 and a set not ready a 409, before any hold.
      if (spec.capture_set_id)
        await takeForJob(tx, principal.orgId, spec.capture_set_id, { id: jobId, kind: body.kind });
      // The hold comes last: it locks the organization's account row, which concurrent submitters
      // and settlements of the organization wait for, so it is held for the hold and the commit only.
      const holdId = newId('hold');
      const room = waiting ? await scheduler.hasRoom(tx, waiting.node) : false;
      const queued = await store.insertJob(tx, {
        id: jobId,
        org_id: principal.orgId,
        buyer_id: principal.buyerId,
        kind: body.kind,
        execution_pool: pool,
        budget_cents: budgetCents,
        max_price_micro_per_unit: maxPriceMicro,
        spec,
        estimated_cost_micro: cost.max_micro,
        estimated_duration_ms: estimatedDurationMs,
        hold_id: holdId,
      });
      await store.addJobEvent(tx, jobId, 'job_submitted', {
        budget_cents: budgetCents,
        region: spec.region,
        strict_jurisdiction: spec.strict_jurisdiction,
        kind: body.kind,
        execution_pool: pool,
        hold_id: holdId,
      });
      const assignment = waiting && room ? await scheduler.assignOnSubmit(ctx, tx, queued, waiting.node) : undefined;
      await openJobRun(tx, queued, assignment?.evidence);
      await ctx.ledger.within(tx).hold(principal.orgId, budgetCents, jobId, { id: holdId });
      assigned = assignment?.work;
      return queued;
    });
  } finally {
    ticket.release();
    if (!assigned) waiting?.handoff.release();
  }
  if (assigned && waiting) await scheduler.handOver(ctx, assigned, waiting.handoff);
  else await ctx.bus.publish('jobs', jobId);
  return {
    job_id: job.id,
    estimated_cost: cost.max_cost,
    estimated_duration_ms: estimatedDurationMs,
    status: job.status,
  };
}

/**
 * The budget a job holds must cover its estimate at the prices it accepts: the estimate's maximum,
 * or its units at `max_price_per_unit` when that is lower (no node asking more takes it). A job
 * holding less would be charged its budget for work worth more (the 250-image job estimated at
 * 0.03 CAD and held at that): 400 naming `/budget`, nothing held.
 */
function refuseBudgetBelow(cost: JobEstimate, budgetCents: number, maxPriceMicro: number): void {
  const reachable = Math.min(cost.max_micro, Math.ceil(cost.units * maxPriceMicro));
  if (budgetCents * 10_000 >= reachable) return;
  throw bad(
    '/budget',
    `is below this job's estimated cost: ${microToCad(reachable)} CAD for ${cost.units} ${cost.unit.replace('_', ' ')}(s) at the prices it accepts; hold at least that`,
  );
}

/**
 * A sovereign job (kind 7 or requires_tee) is refused at submission, before any hold, when no
 * live attested node could take it: it would otherwise hold the buyer's credits and wait forever.
 */
async function refuseWithoutSovereignNode(ctx: ServiceContext, job: MatchJob): Promise<void> {
  const nodes = await liveAttestedNodes(ctx.db, NODE_LIVE_SECONDS);
  if (nodes.some((n) => unmetConstraint(job, n) === undefined)) return;
  const why =
    nodes.length === 0
      ? 'no live node has a verified TEE attestation'
      : `no live node with a verified TEE attestation meets this job (${unmetConstraint(job, nodes[0] as MatchNode) ?? ''})`;
  throw new ApiError('no_capacity', `sovereign job refused: ${why}; nothing was held`);
}

/** The budget a `repository_work` job holds: the kind's highest price for one run, in cents. */
function repositoryJobBudget(): { maxPriceMicro: number; budgetCents: number } {
  const kind = findJobKind(9);
  if (!kind) throw new Error('job kind 9 is missing from the catalogue');
  const maxPriceMicro = kind.price.max_micro_cad / kind.price.per_units;
  return { maxPriceMicro, budgetCents: Math.ceil(maxPriceMicro / 10_000) };
}

/**
 * Runs `queue`, the transaction that calls {@link submitRepositoryJob}, with the job's budget
 * taken from this instance's credit reservation first: the 402 is decided in memory before the
 * transaction opens, as for every job submission, and the hold draws the budget from the
 * reservation.
 *
 * @example
 * const job = await withRepositoryJobCredit(ctx, orgId, () => ctx.db.transaction((tx) => submitRepositoryJob(ctx, tx, owner, input)));
 */
export async function withRepositoryJobCredit<T>(
  ctx: ServiceContext,
  orgId: string,
  queue: () => Promise<T>,
): Promise<T> {
  const ticket = await ctx.reservations.take(orgId, repositoryJobBudget().budgetCents);
  try {
    return await queue();
  } finally {
    ticket.release();
  }
}

/**
 * Queues a kind 9 `repository_work` job for a work order or a preflight, inside the caller's
 * transaction (so the order and its job exist together): the budget is the kind's highest price
 * for one run, held now and settled at the node's price on its receipt. The caller wraps its
 * transaction in {@link withRepositoryJobCredit} and publishes `jobs` on the bus after its commit.
 *
 * @example
 * const job = await submitRepositoryJob(ctx, tx, { orgId, buyerId }, { payload, strict_jurisdiction: 'CA', requires_tee: false, timeout_seconds: 900 });
 */
export async function submitRepositoryJob(
  ctx: ServiceContext,
  tx: Queryable,
  owner: { orgId: string; buyerId: string },
  input: {
    payload: Record<string, unknown>;
    strict_jurisdiction: string | null;
    requires_tee: boolean;
    timeout_seconds: number;
  },
): Promise<store.JobRow> {
  const { maxPriceMicro, budgetCents } = repositoryJobBudget();
  const cost = estimateCost(9, { estimated_runs: 1 });
  const spec: store.JobSpec = {
    model: null,
    region: null,
    strict_jurisdiction: input.strict_jurisdiction,
    delivery_mode: 'inline',
    inline_text: null,
    output_file: null,
    payload_url: null,
    delivery_artifact_put_url: null,
    delivery_manifest_put_url: null,
    delivery_webhook_url: null,
    min_reputation: null,
    green_only: false,
    requires_tee: input.requires_tee,
    required_capabilities: ['capsule'],
    runner_args: [],
    timeout_seconds: input.timeout_seconds,
    estimates: { estimated_runs: 1 },
    estimated_units: cost.units,
    repository_work: input.payload,
  };
  const jobId = newId('job');
  const { holdId } = await ctx.ledger.within(tx).hold(owner.orgId, budgetCents, jobId);
  const pool = executionPool({ kind: 9, requires_tee: input.requires_tee });
  const queued = await store.insertJob(tx, {
    id: jobId,
    org_id: owner.orgId,
    buyer_id: owner.buyerId,
    kind: 9,
    execution_pool: pool,
    budget_cents: budgetCents,
    max_price_micro_per_unit: maxPriceMicro,
    spec,
    estimated_cost_micro: cost.max_micro,
    estimated_duration_ms: input.timeout_seconds * 1000,
    hold_id: holdId,
  });
  await store.addJobEvent(tx, jobId, 'job_submitted', {
    budget_cents: budgetCents,
    region: null,
    strict_jurisdiction: spec.strict_jurisdiction,
    kind: 9,
    execution_pool: pool,
    hold_id: holdId,
  });
  await openJobRun(tx, queued);
  return queued;
}

async function meteredUnits(ctx: ServiceContext, job: store.JobRow): Promise<number | null> {
  if (job.status !== 'completed' || !job.work_id) return null;
  const { rows } = await ctx.db.query<{ metering_units: number }>(
    'SELECT metering_units FROM receipts WHERE work_id = $1',
    [job.work_id],
  );
  return rows[0]?.metering_units ?? null;
}

export async function getJob(ctx: ServiceContext, principal: Principal, jobId: string) {
  const job = await store.findJob(ctx.db, principal.orgId, jobId);
  if (!job) throw new ApiError('not_found', `job ${jobId} not found`);
  return jobView(job, await meteredUnits(ctx, job));
}

export async function listJobs(
  ctx: ServiceContext,
  principal: Principal,
  q: { status?: JobStatus; limit?: number; offset?: number },
) {
  const limit = q.limit ?? 50;
  const offset = q.offset ?? 0;
  const { rows, total } = await store.listJobs(ctx.db, principal.orgId, { status: q.status, limit, offset });
  return { jobs: rows.map((j) => jobView(j)), total, limit, offset };
}

/** Cancels a job that has not finished: its hold is released and its node told to stop at its next heartbeat. */
export async function cancelJob(ctx: ServiceContext, principal: Principal, jobId: string) {
  const job = await ctx.db.transaction(async (tx) => {
    const current = await store.findJob(tx, principal.orgId, jobId, true);
    if (!current) throw new ApiError('not_found', `job ${jobId} not found`);
    if (isTerminal(current.status)) throw new ApiError('conflict', `job ${jobId} is already ${current.status}`);
    const moved = await store.moveJob(tx, jobId, 'cancelled', { failure_reason: 'cancelled by the buyer' });
    if (!moved) throw new ApiError('conflict', `job ${jobId} changed state; try again`);
    if (current.hold_id) await ctx.ledger.within(tx).release(current.hold_id);
    if (current.spec.capture_set_id)
      await releaseFromJob(tx, current.spec.capture_set_id, {
        id: jobId,
        status: 'cancelled',
        reason: `cancelled by ${principal.buyerId}`,
      });
    if (current.work_id) await cancelOpenWork(tx, current.work_id);
    await store.addJobEvent(tx, jobId, 'job_cancelled', {
      previous_status: current.status,
      by: principal.buyerId,
      node_id: current.node_id,
      released_cents: current.budget_cents,
    });
    await closeJobRun(
      tx,
      ctx.secrets,
      current,
      'cancelled',
      endedWithoutResult(current, 'job.cancelled', `cancelled by ${principal.buyerId} while ${current.status}`, {
        previous_status: current.status,
        by: principal.buyerId,
        node_id: current.node_id,
      }),
    );
    await enqueueTerminalWebhook(tx, moved);
    return moved;
  });
  await ctx.bus.publish('work', job.work_id ?? job.id);
  return jobView(job);
}

export async function jobAudit(ctx: ServiceContext, principal: Principal, jobId: string) {
  const job = await store.findJob(ctx.db, principal.orgId, jobId);
  if (!job) throw new ApiError('not_found', `job ${jobId} not found`);
  const events = await store.listJobEvents(ctx.db, jobId);
  // Every hold, charge and release of the job is its own row (docs/billing.md).
  const ledger = await ledgerOfRef(ctx.db, principal.orgId, jobId);
  const receipts = await ctx.db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM receipts WHERE job_id = $1 AND org_id = $2',
    [jobId, principal.orgId],
  );
  return {
    job_id: job.id,
    buyer_id: job.buyer_id,
    status: job.status,
    created_at: job.created_at.toISOString(),
    assigned_at: job.assigned_at?.toISOString() ?? null,
    completed_at: job.completed_at?.toISOString() ?? null,
    audit_generated: new Date().toISOString(),
    receipts_count: receipts.rows[0]?.n ?? 0,
    credit_ledger: ledger.map(transactionRecord),
    events: events.map((e) => ({ at: e.at.toISOString(), type: e.type, details: e.details })),
  };
}

/** The stored result of a completed job, for `GET .../result`. */
export async function jobResult(ctx: ServiceContext, principal: Principal, jobId: string) {
  const job = await store.findJob(ctx.db, principal.orgId, jobId);
  if (!job) throw new ApiError('not_found', `job ${jobId} not found`);
  if (job.status !== 'completed' || !job.work_id)
    throw new ApiError('conflict', `job ${jobId} is ${job.status}; a result exists once it is completed`);
  const blob = await readWorkResult(ctx, job.work_id);
  if (!blob) throw new ApiError('not_found', `the result of job ${jobId} is no longer stored`);
  return { ...blob, resultHash: job.result_hash ?? blob.sha256, fileName: job.spec.output_file };
}

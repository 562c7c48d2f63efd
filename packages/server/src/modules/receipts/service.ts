import { createHash } from 'node:crypto';
import { verifySvc1 } from '@svc/protocol';
import type { ServiceContext } from '../../context.js';
import type { Queryable } from '../../platform/db/index.js';
import { ApiError } from '../../platform/errors.js';
import { deliverArtifacts, enqueueTerminalWebhook } from '../jobs/delivery.js';
import { afterLostAttempt } from '../jobs/states.js';
import { addJobEvent, findJobById, moveJob } from '../jobs/store.js';
import type { NodeRow } from '../nodes/store.js';
import { ledgerCharged, receiptEvents } from '../evidence/events.js';
import { recordEvents } from '../evidence/recorder.js';
import { closeJobRun, endedWithoutResult } from '../jobs/evidence.js';
import {
  findWork,
  lockWorkForReceipt,
  noteWorkFailure,
  setWorkStatus,
  storeWorkResult,
  type WorkRow,
} from '../work/store.js';
import { completeFromReceipt, gatewayReceiptMetadata, lockRequestOfWork } from '../gateway/settle.js';
import { usageFromUnits } from '../gateway/pricing.js';
import { openingsSettled } from '../gateway/attempts.js';
import { rebuildOpening } from '../gateway/rebuild.js';
import { takeOpening, type FreshOpening } from '../gateway/fresh.js';
import { checkTicket, type WorkTicket } from '../gateway/ticket.js';
import { insertReceipt, receiptIdOf, receiptView, type ReceiptRow } from './store.js';
import { completeMany, type FastReceipt } from './complete-many.js';
import { WriteFailure, type WriteKind } from '../../platform/writer.js';
import { attestationSummary } from '../attestation/service.js';
import {
  checkCaptureReceipt,
  finishProcessing,
  isCaptureKind,
  outputUploads,
  releaseFromJob,
  type CaptureReceiptCheck,
} from '../capture/processing.js';

/** The platform's share of each job's charge, in basis points (configurable later). */
export { PLATFORM_FEE_BPS } from '../billing/rules.js';

async function openWorkOf(ctx: ServiceContext, node: NodeRow, workId: string) {
  // Gateway work may reach its node before its opening commits: the row is there once it settles.
  await openingsSettled(ctx.hub.attempts, [workId]);
  const work = await findWork(ctx.db, workId);
  // Work leased to another node does not exist for this one.
  if (!work || work.node_id !== node.id) throw new ApiError('not_found', `work ${workId} not found for this node`);
  return work;
}

/** The body of `POST /api/v1/node/work/{work_id}/result`, also carried inline by a receipt as `result`. */
export interface ResultUpload {
  output: string;
  encoding: 'utf8' | 'base64';
  content_type?: string;
  result_hash: string;
  metering_units: number;
  usage?: Record<string, unknown>;
}

/** The result's bytes, checked against its `result_hash` (400 naming `path` when they differ). */
function resultBytes(body: ResultUpload, path: string): Buffer {
  const bytes = Buffer.from(body.output, body.encoding === 'base64' ? 'base64' : 'utf8');
  const actual = createHash('sha256').update(bytes).digest('hex');
  if (actual !== body.result_hash)
    throw new ApiError(
      'invalid_request',
      `result_hash ${body.result_hash} does not match the SHA-256 of the output (${actual})`,
      [{ path, message: 'does not match the output' }],
    );
  return bytes;
}

/**
 * Stores the result of leased work and marks it delivered (or, receipted in the same
 * transaction, completed), in the caller's transaction when `db` is one. False when the work was
 * no longer leased without a result (it changed state).
 */
async function storeResult(
  ctx: ServiceContext,
  db: Queryable,
  workId: string,
  bytes: Buffer,
  body: ResultUpload,
  status: 'delivered' | 'completed' = 'delivered',
): Promise<boolean> {
  const contentType = body.content_type ?? 'application/json';
  await ctx.blobs.within(db).put(`results/${workId}`, bytes, contentType);
  return storeWorkResult(db, workId, {
    result_hash: body.result_hash,
    content_type: contentType,
    bytes: bytes.length,
    metering_units: body.metering_units,
    usage: body.usage,
    status,
  });
}

/**
 * Stores a node's result for its work after checking the bytes hash to `result_hash`. Sending
 * the same result again is accepted; a different one is 409: one job, one result.
 */
export async function deliverResult(ctx: ServiceContext, node: NodeRow, workId: string, body: ResultUpload) {
  const work = await openWorkOf(ctx, node, workId);
  const bytes = resultBytes(body, '/result_hash');
  if (work.result_hash !== null) {
    if (work.result_hash === body.result_hash)
      return { work_id: workId, result_hash: body.result_hash, status: work.status };
    throw new ApiError('conflict', `work ${workId} already has a different result`);
  }
  // A gateway attempt whose lease lapsed takes its result; its receipt then decides (applyReceipt).
  if (work.status !== 'leased' && !(work.status === 'lost' && work.type !== 'job'))
    throw new ApiError('conflict', `work ${workId} is ${work.status}; no result is accepted`);
  if (!(await storeResult(ctx, ctx.db, workId, bytes, body)))
    throw new ApiError('conflict', `work ${workId} changed state; fetch it again`);
  return { work_id: workId, result_hash: body.result_hash, status: 'delivered' };
}

/**
 * Accepts a node's SVC1 receipt for delivered work and completes the job in one transaction:
 * receipt stored, job completed, buyer charged min(units x price, budget), rest of the hold
 * released, operator credited its earning. Strict: forged, mismatched, unleased or second
 * receipts are refused and nothing is charged. With `result` (the result upload, inline) the
 * result is stored in the same transaction first: one call instead of two, for the gateway's
 * hot path. A result already delivered must be the same one.
 */
export async function submitReceipt(
  ctx: ServiceContext,
  node: NodeRow,
  body: {
    job_id: string;
    pubkey: string;
    result_hash: string;
    signature: string;
    metering_units: number;
    metadata?: Record<string, unknown>;
    result?: ResultUpload;
    /** The work item's ticket, returned unchanged (gateway work dispatched before its opening committed). */
    ticket?: WorkTicket;
  },
) {
  if (body.pubkey !== node.pubkey)
    throw new ApiError('forbidden', 'pubkey is not the key of the node making the request');
  const fields = {
    job_id: body.job_id,
    node_public_key_hex: body.pubkey,
    result_hash_hex: body.result_hash,
    metering_units: body.metering_units,
  };
  if (!verifySvc1(fields, body.signature))
    throw new ApiError('invalid_request', 'the SVC1 signature does not verify for these fields and this node key', [
      { path: '/signature', message: 'does not verify' },
    ]);
  const inline = body.result;
  if (inline && inline.result_hash !== body.result_hash)
    throw new ApiError('invalid_request', "result.result_hash differs from the receipt's result_hash", [
      { path: '/result/result_hash', message: 'differs from /result_hash' },
    ]);
  const inlineBytes = inline ? resultBytes(inline, '/result/result_hash') : undefined;
  const fast = inline && inlineBytes ? await completeInMemory(ctx, node, body, inline, inlineBytes) : undefined;
  if (fast) return fast;
  // A receipt for a request this process is completing behind its answer waits for that write,
  // then meets the stored receipt (a duplicate): applied at most once.
  await ctx.hub.attempts.pendingWrite(body.job_id)?.catch(() => undefined);
  await openingsSettled(ctx.hub.attempts, [body.job_id]);
  const capture = await checkCaptureWork(ctx, node, body, inline, inlineBytes);
  const outcome = await ctx.db.transaction((tx) => applyReceipt(ctx, tx, node, body, inline, inlineBytes, capture));
  if (outcome.job && (outcome.job.spec.delivery_artifact_put_url || outcome.job.spec.delivery_manifest_put_url)) {
    const blob = await ctx.blobs.get(`results/${outcome.job.work_id}`);
    const job = outcome.job;
    if (blob)
      void deliverArtifacts(ctx, job, blob, outcome.receipt.id).catch((err: unknown) =>
        ctx.log.error({ err, job_id: job.id }, 'artifact delivery failed'),
      );
  }
  // A gateway request waits for its receipt: here (handed over with the answer), or on another
  // instance (told over the bus; it reads the outcome from the store).
  const handedOver =
    'request' in outcome &&
    outcome.request !== undefined &&
    ctx.hub.completed(outcome.receipt.work_id, {
      receiptId: outcome.receipt.id,
      request: outcome.request,
      ...(inlineBytes ? { output: inlineBytes } : {}),
    });
  if (!outcome.job && !handedOver) await ctx.bus.publish('work', outcome.receipt.work_id);
  // The waiting client's answer goes out before this acknowledgement: its request runs on from
  // here in microtasks, and the node is not waiting on anyone (its result is stored).
  if (handedOver) await new Promise((resolve) => setImmediate(resolve));
  return receiptView(outcome.receipt);
}

/** A receipt as `submitReceipt` takes it. */
type ReceiptBody = Parameters<typeof submitReceipt>[2];

export { receiptIdOf } from './store.js';

/**
 * Everything a receipt changes, inside `tx` (`submitReceipt`'s own transaction, or a flush of the
 * group-commit writer): checked against the stored work again (leased to this node, no receipt
 * yet, the delivered result's hash), so a receipt is applied at most once whatever path it took.
 */
async function applyReceipt(
  ctx: ServiceContext,
  tx: Queryable,
  node: NodeRow,
  body: ReceiptBody,
  inline: ResultUpload | undefined,
  inlineBytes: Buffer | undefined,
  capture: CaptureReceiptCheck | undefined,
  fresh?: FreshOpening,
) {
  // Opened in this very transaction (gateway/fresh.ts): its rows are as inserted, nothing to lock again.
  const opened = fresh && fresh.request.id === body.job_id && fresh.work.node_id === node.id ? fresh : undefined;
  let locked = opened ? { ...opened.work, has_receipt: false } : await lockWorkForReceipt(tx, body.job_id, node.id);
  // Unknown work with a ticket: its opening was lost before it committed; the checked ticket rebuilds it.
  if (!locked && body.ticket) {
    const ticket = checkTicket(ctx.secrets, body.ticket, { nodeId: node.id, requestId: body.job_id });
    if (await rebuildOpening(ctx, tx, node, ticket)) locked = await lockWorkForReceipt(tx, body.job_id, node.id);
  }
  if (!locked) throw new ApiError('not_found', `no work for ${body.job_id} was leased to this node`);
  if (locked.has_receipt) throw new ApiError('conflict', `a receipt for ${body.job_id} was already accepted`);
  let work: WorkRow = locked;
  // A gateway attempt whose lease lapsed while its receipt could not reach any instance (all of
  // them down longer than the lease, or the node cut off): the node did the work, and the client
  // may have had the answer. Its receipt is taken as long as the request still runs on this
  // attempt (`lockRequestOfWork` below): not failed over, not ended. A job's lost attempt has
  // gone back to the queue, so its receipt is refused.
  const lapsed = work.status === 'lost' && work.type !== 'job';
  if (lapsed && work.result_hash !== null) work = { ...work, status: 'delivered' };
  // An inline result is stored as completed at once: if a check below refuses the receipt, the
  // transaction rolls the result back with it.
  let resultCompleted = false;
  if (
    inline &&
    inlineBytes &&
    (work.status === 'leased' || lapsed) &&
    work.result_hash === null &&
    (await storeResult(ctx, tx, work.id, inlineBytes, inline, 'completed'))
  ) {
    work = {
      ...work,
      status: 'delivered',
      result_hash: inline.result_hash,
      metering_units: inline.metering_units,
      usage: inline.usage ?? null,
    };
    resultCompleted = true;
  }
  if (work.status !== 'delivered' || work.result_hash === null) {
    throw new ApiError(
      'conflict',
      work.status === 'leased'
        ? 'deliver the result (POST /api/v1/node/work/{work_id}/result) before the receipt'
        : `work is ${work.status}; no receipt is accepted`,
    );
  }
  if (work.result_hash !== body.result_hash)
    throw new ApiError('invalid_request', 'result_hash differs from the delivered result', [
      { path: '/result_hash', message: 'differs from the delivered result' },
    ]);
  const job = work.type === 'job' ? await findJobById(tx, work.job_id, true) : undefined;
  if (work.type === 'job' && (!job || job.work_id !== work.id || !['assigned', 'running'].includes(job.status))) {
    throw new ApiError('conflict', `job ${body.job_id} is no longer leased to this node`);
  }
  const gateway =
    work.type === 'job' ? undefined : opened && !lapsed ? opened.request : await lockRequestOfWork(tx, work);
  // Sovereign work carries the attestation the node held when it did the work (docs/attestation.md).
  const sovereign = job?.execution_pool === 'sovereign' || gateway?.metadata.requires_tee === true;
  const attestation = sovereign ? await attestationSummary(tx, node.id) : null;
  const receipt = await insertReceipt(tx, {
    id: receiptIdOf(work.id),
    job_id: body.job_id,
    work_id: work.id,
    org_id: work.org_id,
    node_id: node.id,
    node_public_key: node.pubkey,
    result_hash: body.result_hash,
    metering_units: body.metering_units,
    signature: body.signature,
    metadata: {
      ...(body.metadata ?? {}),
      node_country: node.country,
      node_region: node.region,
      gpu_model: node.gpu_model,
      ...(gateway ? gatewayReceiptMetadata(gateway, node) : {}),
      ...(attestation ? { attestation } : {}),
    },
  });
  const evidenceNode = attestation ? { ...node, attestation } : node;
  if (!resultCompleted) await setWorkStatus(tx, work.id, 'completed');
  if (gateway)
    return {
      receipt,
      job: undefined,
      request: await completeFromReceipt(ctx, tx, gateway, {
        work,
        node: evidenceNode,
        receipt,
        ...(opened ? { run: opened.run } : {}),
      }),
    };
  if (!job) return { receipt, job: undefined };
  const usageMicro = Math.ceil(body.metering_units * work.price_micro_per_unit);
  const settlement = job.hold_id
    ? await ctx.ledger.within(tx).settle(job.hold_id, usageMicro, {
        description: `job ${job.id}: ${body.metering_units} units on ${node.id}`,
        ref: job.id,
      })
    : { charged_cents: 0, charged_micro: 0, free_micro: 0, released_cents: 0, transaction: null };
  const earned = job.hold_id
    ? await ctx.ledger
        .within(tx)
        .earn(node.org_id, settlement, { description: `job ${job.id} on ${node.id}`, ref: job.id })
    : null;
  const earning = earned?.cents ?? 0;
  const completed = await moveJob(tx, job.id, 'completed', {
    result_hash: body.result_hash,
    charged_cents: settlement.charged_cents,
    charged_micro: settlement.charged_micro,
  });
  await closeJobRun(tx, ctx.secrets, job, 'completed', [
    ...receiptEvents(receipt, evidenceNode, work.id),
    ledgerCharged(job.hold_id, settlement, earned?.transaction ?? null, 'receipt.verified'),
    {
      type: 'job.completed',
      summary: `completed on ${node.id}: ${body.metering_units} units, result ${body.result_hash.slice(0, 16)}...`,
      metadata: {
        result_hash: body.result_hash,
        receipt_id: receipt.id,
        metering_units: body.metering_units,
        charged_cents: settlement.charged_cents,
      },
      causedBy: ['receipt.verified'],
    },
  ]);
  await addJobEvent(tx, job.id, 'job_completed', {
    result_hash: body.result_hash,
    node_id: node.id,
    receipt_id: receipt.id,
    metering_units: body.metering_units,
    charged_cents: settlement.charged_cents,
    charged_micro: settlement.charged_micro,
    released_cents: settlement.released_cents,
    operator_earning_cents: earning,
  });
  if (capture && job.spec.capture_set_id === capture.captureSetId)
    await finishProcessing(tx, ctx.secrets, { id: job.id, node_id: node.id, result_hash: body.result_hash }, capture);
  if (completed) await enqueueTerminalWebhook(tx, completed);
  return { receipt, job: completed };
}

/**
 * The fast path of a gateway receipt (DESIGN.md section 4, revised 2026-11-24): the request waits
 * in this process, the node sent its result inline, and the signature, key and result hash are
 * already checked. The attempt is claimed in memory (the work is the request's current attempt,
 * leased to this node, no receipt claimed it yet), the waiting client gets its answer at once,
 * and the records go to the group-commit writer. Resolves once they committed: only then may the
 * node be acknowledged. Undefined when memory cannot decide: the store's path runs instead.
 */
async function completeInMemory(
  ctx: ServiceContext,
  node: NodeRow,
  body: ReceiptBody,
  inline: ResultUpload,
  inlineBytes: Buffer,
) {
  const claimed = ctx.hub.attempts.claim(body.job_id, node.id);
  if (!claimed) return undefined;
  const { row } = claimed;
  const workId = row.work_id ?? '';
  const receiptId = receiptIdOf(workId);
  const written = enqueueFastReceipt(ctx, { node, body, inline, inlineBytes });
  ctx.hub.attempts.writing(row.id, written);
  const usage = usageFromUnits(row.type, body.metering_units, inline.usage ?? null);
  ctx.hub.completed(workId, {
    receiptId,
    request: { ...row, status: 'completed', usage: usage as Record<string, number>, receipt_id: receiptId },
    output: inlineBytes,
  });
  return receiptView(await written);
}

/** A fast-path receipt as the writer queues it: `completeMany`'s item, with the whole body for the one-by-one path. */
export type QueuedReceipt = FastReceipt & { ctx: ServiceContext; body: ReceiptBody; inline: ResultUpload };

/**
 * The writer's kind for fast-path receipts: written many per flush (`completeMany`), after the
 * flush's openings (rank 2: a request's opening is queued before its receipt). An item that is not
 * the plain case is applied after them one by one, as `submitReceipt` would, each under a
 * savepoint: refused, it rolls back and rejects alone while the flush commits. A flush holding one
 * receipt applies it as `submitReceipt` does (refused, the flush of one fails and it rejects).
 */
const fastReceipts: WriteKind<QueuedReceipt, ReceiptRow> = {
  name: 'gateway receipts',
  rank: 2,
  async writeMany(tx, items) {
    const [first] = items;
    if (!first) return [];
    // One receipt alone takes today's path: the batch's statements only pay off from two on. Its
    // opening, when it waited for it in this flush, is known as inserted (gateway/fresh.ts).
    if (items.length === 1) {
      const fresh = takeOpening(tx, first.body.job_id);
      const { receipt } = await applyReceipt(
        first.ctx,
        tx,
        first.node,
        first.body,
        first.inline,
        first.inlineBytes,
        undefined,
        fresh,
      );
      return [receipt];
    }
    const batched = await completeMany(first.ctx, tx, items);
    const out: (ReceiptRow | WriteFailure)[] = [];
    for (const [i, item] of items.entries()) out.push(batched[i] ?? (await applyAlone(tx, item)));
    return out;
  },
};

/**
 * Applies one queued fast-path receipt as `submitReceipt` does (`applyReceipt`), under a savepoint
 * of the flush's transaction: refused, its writes roll back and it fails alone.
 */
export async function applyAlone(tx: Queryable, i: QueuedReceipt): Promise<ReceiptRow | WriteFailure> {
  await tx.query('SAVEPOINT fast_receipt');
  try {
    const { receipt } = await applyReceipt(i.ctx, tx, i.node, i.body, i.inline, i.inlineBytes, undefined);
    await tx.query('RELEASE SAVEPOINT fast_receipt');
    return receipt;
  } catch (err) {
    await tx.query('ROLLBACK TO SAVEPOINT fast_receipt');
    return new WriteFailure(err);
  }
}

/** Enqueues fast-path receipts as `completeInMemory` does (tests drive a flush of many with it). */
export function enqueueFastReceipt(ctx: ServiceContext, item: Omit<QueuedReceipt, 'ctx'>): Promise<ReceiptRow> {
  return ctx.writer.enqueueAs(fastReceipts, { ctx, ...item });
}

/**
 * A receipt for a kind 8 or 10 job is checked before its transaction (every output is read and
 * hashed, which must not hold row locks): its result is the output manifest, and its metering
 * what the server counts itself (capture/processing.ts). Undefined for any other work.
 */
async function checkCaptureWork(
  ctx: ServiceContext,
  node: NodeRow,
  body: { job_id: string; result_hash: string; metering_units: number },
  inline: ResultUpload | undefined,
  inlineBytes: Buffer | undefined,
): Promise<CaptureReceiptCheck | undefined> {
  const work = await lockWorkForReceipt(ctx.db, body.job_id, node.id);
  if (!work || work.type !== 'job' || !isCaptureKind(work.kind) || work.has_receipt) return undefined;
  const job = await findJobById(ctx.db, work.job_id);
  if (!job?.spec.capture_set_id) return undefined;
  const stored = inlineBytes ? undefined : await ctx.blobs.get(`results/${work.id}`);
  return checkCaptureReceipt(ctx, {
    workId: work.id,
    kind: work.kind,
    captureSetId: job.spec.capture_set_id,
    result: inlineBytes ?? stored?.bytes,
    meteringUnits: body.metering_units,
    usage: inline ? (inline.usage ?? null) : work.usage,
  });
}

/**
 * `POST /api/v1/node/work/{work_id}/outputs`: a kind 8 or 10 node declares its output manifest
 * and gets a presigned PUT URL per output, for work leased to it.
 */
export async function outputUploadUrls(ctx: ServiceContext, node: NodeRow, workId: string, body: unknown) {
  const work = await openWorkOf(ctx, node, workId);
  if (work.status !== 'leased')
    throw new ApiError('conflict', `work ${workId} is ${work.status}; no outputs are taken`);
  return outputUploads(ctx, work, body);
}

/** A node reports it could not do the work: retryable -> back to the queue (3 attempts), else failed. */
export async function failWork(
  ctx: ServiceContext,
  node: NodeRow,
  workId: string,
  body: { message: string; retryable?: boolean },
) {
  const work = await openWorkOf(ctx, node, workId);
  const requeued = await ctx.db.transaction(async (tx) => {
    const locked = await findWork(tx, workId, true);
    if (!locked || !['leased', 'delivered'].includes(locked.status))
      throw new ApiError('conflict', `work ${workId} is ${locked?.status ?? 'gone'}`);
    await setWorkStatus(tx, workId, 'failed');
    if (work.type !== 'job') {
      await noteWorkFailure(tx, workId, body.message, body.retryable ?? false);
      return false;
    }
    const job = await findJobById(tx, work.job_id, true);
    if (!job || job.work_id !== workId) return false;
    await addJobEvent(tx, job.id, 'job_attempt_failed', {
      node_id: node.id,
      work_id: workId,
      message: body.message,
      retryable: body.retryable ?? false,
    });
    const attemptFailed = {
      type: 'job.attempt_failed',
      summary: `${node.id} reported a failure: ${body.message}`.slice(0, 500),
      metadata: { node_id: node.id, work_id: workId, message: body.message, retryable: body.retryable ?? false },
    };
    const next = body.retryable ? afterLostAttempt(job.attempts) : 'failed';
    if (next === 'pending') {
      await moveJob(tx, job.id, 'pending', { node_id: null, work_id: null });
      await addJobEvent(tx, job.id, 'job_requeued', { attempt: job.attempts, reason: body.message });
      await recordEvents(tx, job.id, [
        attemptFailed,
        {
          type: 'job.requeued',
          summary: 'back in the queue for another node',
          metadata: { attempt: job.attempts, reason: body.message },
          causedBy: ['job.attempt_failed'],
        },
      ]);
      return true;
    }
    const failed = await moveJob(tx, job.id, 'failed', { failure_reason: body.message });
    if (job.hold_id) await ctx.ledger.within(tx).release(job.hold_id);
    if (job.spec.capture_set_id)
      await releaseFromJob(tx, job.spec.capture_set_id, { id: job.id, status: 'failed', reason: body.message });
    await addJobEvent(tx, job.id, 'job_failed', {
      reason: body.message,
      attempts: job.attempts,
      released_cents: job.budget_cents,
    });
    await closeJobRun(tx, ctx.secrets, job, 'failed', [
      attemptFailed,
      ...endedWithoutResult(
        job,
        'job.failed',
        `failed after ${job.attempts} attempt(s): ${body.message}`.slice(0, 500),
        { reason: body.message, attempts: job.attempts },
      ),
    ]);
    if (failed) await enqueueTerminalWebhook(tx, failed);
    return false;
  });
  if (requeued) await ctx.bus.publish('jobs', work.job_id);
  if (work.type !== 'job') await ctx.bus.publish('work', workId);
  return { message: requeued ? 'work failed; the job is queued again' : 'work failed' };
}

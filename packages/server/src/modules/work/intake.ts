import { sha256Hex, verifySvc1 } from '@svc/protocol';
import type { ServiceContext } from '../../service-context.js';
import type { Queryable } from '../../platform/db/index.js';
import { ApiError } from '../../platform/errors.js';
import { lowerReputation, REFUSED_RECEIPT_PENALTY, type NodeRow } from '../nodes/store.js';
import { findWork, lockWorkForReceipt, setWorkStatus, storeWorkResult, type WorkRow } from './store.js';
import {
  completionOf,
  RECEIPT_REFUSED,
  type FailureReport,
  type FreshWork,
  type ReceiptBody,
  type ResultUpload,
} from './completion.js';
import { keepResult } from './results.js';
import { insertReceipt, receiptIdOf, receiptView } from '../receipts/store.js';

export type { ResultUpload } from './completion.js';

async function openWorkOf(ctx: ServiceContext, node: NodeRow, workId: string) {
  // Direct work may reach its node before its owner's opening commits: the row is there once it settles.
  await ctx.completions.direct.settled(ctx, [workId]);
  const work = await findWork(ctx.db, workId);
  // Work leased to another node does not exist for this one.
  if (!work || work.node_id !== node.id) throw new ApiError('not_found', `work ${workId} not found for this node`);
  return work;
}

/** The result's bytes, checked against its `result_hash` (400 naming `path` when they differ). */
function resultBytes(body: ResultUpload, path: string): Buffer {
  const bytes = Buffer.from(body.output, body.encoding === 'base64' ? 'base64' : 'utf8');
  const actual = sha256Hex(bytes);
  if (actual !== body.result_hash)
    throw new ApiError(
      'invalid_request',
      `result_hash ${body.result_hash} does not match the SHA-256 of the output (${actual})`,
      [{ path, message: 'does not match the output' }],
    );
  return bytes;
}

/**
 * Stores the result of leased work (or of a lapsed attempt, when its owner takes those) and marks
 * it delivered (or, receipted in the same transaction, completed), in the caller's transaction
 * when `db` is one. False when the work was no longer leased without a result (it changed state).
 */
async function storeResult(
  ctx: ServiceContext,
  db: Queryable,
  work: Pick<WorkRow, 'id' | 'type'>,
  bytes: Buffer,
  body: ResultUpload,
  status: 'delivered' | 'completed' = 'delivered',
): Promise<boolean> {
  const contentType = body.content_type ?? 'application/json';
  const inline = await keepResult(ctx.blobs.within(db), work.id, bytes, contentType);
  return storeWorkResult(db, work.id, {
    result_hash: body.result_hash,
    content_type: contentType,
    bytes: bytes.length,
    metering_units: body.metering_units,
    usage: body.usage,
    status,
    inline,
    lapsedTaken: completionOf(ctx.completions, work).takesLapsed,
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
  // An attempt whose lease lapsed takes its result when its owner takes lapsed attempts; its
  // receipt then decides (applyReceipt).
  const lapsedTaken = work.status === 'lost' && completionOf(ctx.completions, work).takesLapsed;
  if (work.status !== 'leased' && !lapsedTaken)
    throw new ApiError('conflict', `work ${workId} is ${work.status}; no result is accepted`);
  if (!(await storeResult(ctx, ctx.db, work, bytes, body)))
    throw new ApiError('conflict', `work ${workId} changed state; fetch it again`);
  return { work_id: workId, result_hash: body.result_hash, status: 'delivered' };
}

/**
 * The receipt with its result hash under `result_hash`, from either of the two names the spec
 * gives it (`result_hash`, `result_hash_hex`): the SVC1 signature covers the hash, so one of them
 * is required (400 naming `/result_hash`), and two that differ are refused (400 naming
 * `/result_hash_hex`).
 *
 * @example
 * receiptWithResultHash({ ...fields, result_hash_hex: hash }).result_hash // hash
 */
export function receiptWithResultHash(
  body: Omit<ReceiptBody, 'result_hash'> & { result_hash?: string | undefined },
): ReceiptBody {
  const { result_hash, result_hash_hex } = body;
  if (result_hash !== undefined && result_hash_hex !== undefined && result_hash !== result_hash_hex)
    throw new ApiError(
      'invalid_request',
      'result_hash_hex differs from result_hash; send one hash, or the same twice',
      [{ path: '/result_hash_hex', message: 'differs from /result_hash' }],
    );
  const hash = result_hash ?? result_hash_hex;
  if (hash === undefined)
    throw new ApiError(
      'invalid_request',
      'result_hash (or its alias result_hash_hex) is required: the SVC1 signature covers the result hash',
      [{ path: '/result_hash', message: "must have required property 'result_hash'" }],
    );
  return { ...body, result_hash: hash };
}

/**
 * Accepts a node's SVC1 receipt for delivered work and completes the job in one transaction:
 * receipt stored, job completed, buyer charged min(units x price, budget), rest of the hold
 * released, operator credited its earning. Strict: forged, mismatched, unleased or second
 * receipts are refused and nothing is charged. With `result` (the result upload, inline) the
 * result is stored in the same transaction first: one call instead of two, on direct work's hot
 * path. A result already delivered must be the same one.
 */
export async function submitReceipt(ctx: ServiceContext, node: NodeRow, body: ReceiptBody) {
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
  // Checked: the owner may answer from memory and write it with its own records.
  const written =
    inline && inlineBytes ? ctx.completions.direct.acceptVerified(ctx, { node, body, inline, inlineBytes }) : undefined;
  if (written) return receiptView(await written);
  // A receipt for work whose records this process is still writing (its opening, or the same
  // receipt answered from memory) waits for that write, then meets the stored rows (a duplicate
  // is 409): applied at most once.
  await ctx.completions.direct.settled(ctx, [body.job_id]);
  const check = await checkBeforeReceipt(ctx, node, body, inlineBytes);
  const outcome = await ctx.db
    .transaction((tx) => applyReceipt(ctx, tx, node, body, inline, inlineBytes, check))
    .catch(async (err: unknown) => {
      // Refused over its bound, nothing written: the attempt fails and the node pays in reputation.
      if (err instanceof OverBound) await failRefused(ctx, node, err);
      throw err;
    });
  await outcome.completion.afterReceipt(ctx, outcome.done, {
    receipt: outcome.receipt,
    ...(inlineBytes ? { output: inlineBytes } : {}),
  });
  return receiptView(outcome.receipt);
}

export { receiptIdOf } from '../receipts/store.js';

/**
 * A receipt signing more units than its work allows (`WorkCompletion.meteringBound`, issue 40
 * point 6): 400 naming `/metering_units`, and nothing of it is written.
 */
export class OverBound extends ApiError {
  constructor(
    readonly workId: string,
    readonly units: number,
    readonly bound: number,
  ) {
    super(
      'invalid_request',
      `metering_units ${units} exceed the bound of ${bound} this work allows (docs/receipts.md)`,
      [{ path: '/metering_units', message: `must be at most ${bound} for this work` }],
    );
  }
}

/**
 * After `err` refused a receipt: its attempt fails as a retryable failure (the owner of direct work
 * moves on or ends with an error, a job goes back to the queue per its attempts) and the node's
 * reputation is lowered, in one transaction. Nothing when the attempt had already ended.
 */
async function failRefused(ctx: ServiceContext, node: NodeRow, err: OverBound): Promise<void> {
  const report = { message: `${RECEIPT_REFUSED}${err.message}`, retryable: true };
  await failAttempt(ctx, node, err.workId, report, { refused: true }).catch((e: unknown) => {
    if (!(e instanceof ApiError && e.code === 'conflict')) throw e;
  });
}

/**
 * Everything a receipt changes, inside `tx` (`submitReceipt`'s own transaction, or the owner's
 * flush of records answered from memory): checked against the stored work again (leased to this
 * node, no receipt yet, the delivered result's hash), so a receipt is applied at most once
 * whatever path it took. With `fresh`, the work and its owner as `tx` itself inserted them: taken
 * as they are, neither locked nor read again.
 */
export async function applyReceipt(
  ctx: ServiceContext,
  tx: Queryable,
  node: NodeRow,
  body: ReceiptBody,
  inline: ResultUpload | undefined,
  inlineBytes: Buffer | undefined,
  check: unknown,
  fresh?: FreshWork,
) {
  // Opened in this very transaction (the owner's flush hands it over): as inserted, nothing to lock again.
  let locked = fresh ? { ...fresh.work, has_receipt: false } : await lockWorkForReceipt(tx, body.job_id, node.id);
  // Unknown work with a ticket: its opening was lost before it committed; the checked ticket rebuilds it.
  if (!locked && body.ticket && (await ctx.completions.direct.rebuild(ctx, tx, node, body.ticket, body.job_id)))
    locked = await lockWorkForReceipt(tx, body.job_id, node.id);
  if (!locked) throw new ApiError('not_found', `no work for ${body.job_id} was leased to this node`);
  if (locked.has_receipt) throw new ApiError('conflict', `a receipt for ${body.job_id} was already accepted`);
  let work: WorkRow = locked;
  // An attempt whose lease lapsed while its receipt could not reach any instance (all of them down
  // longer than the lease, or the node cut off): the node did the work, and the owner's client may
  // have had the answer. Its receipt is taken when the owner takes lapsed attempts, as long as the
  // owner still runs on this attempt (its `lockOwner` below). An owner that went back to a queue
  // (a job) takes none: its receipt is refused.
  const lapsed = work.status === 'lost' && completionOf(ctx.completions, work).takesLapsed;
  if (lapsed && work.result_hash !== null) work = { ...work, status: 'delivered' };
  // An inline result is stored as completed at once: if a check below refuses the receipt, the
  // transaction rolls the result back with it.
  let resultCompleted = false;
  if (
    inline &&
    inlineBytes &&
    (work.status === 'leased' || lapsed) &&
    work.result_hash === null &&
    (await storeResult(ctx, tx, work, inlineBytes, inline, 'completed'))
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
  const completion = completionOf(ctx.completions, work);
  const owner = fresh && !lapsed ? fresh.owner : await completion.lockOwner(ctx, tx, work);
  const bound = completion.meteringBound(owner, node);
  if (bound !== undefined && body.metering_units > bound) throw new OverBound(work.id, body.metering_units, bound);
  const [facts] = await completion.receiptFacts(ctx, tx, [{ owner, node }]);
  const attestation = facts?.attestation ?? null;
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
      ...facts?.metadata,
      ...(attestation ? { attestation } : {}),
    },
  });
  const evidenceNode = attestation ? { ...node, attestation } : node;
  if (!resultCompleted) await setWorkStatus(tx, work.id, 'completed');
  const done = await completion.complete(ctx, tx, owner, { work, node: evidenceNode, receipt, body, check });
  return { receipt, completion, done };
}

/**
 * What the work's owner checks before the receipt's transaction (reads that must not hold row
 * locks: a kind 8 or 10 job reads and hashes every output). Undefined when there is nothing to check.
 */
async function checkBeforeReceipt(
  ctx: ServiceContext,
  node: NodeRow,
  body: ReceiptBody,
  inlineBytes: Buffer | undefined,
): Promise<unknown> {
  const work = await lockWorkForReceipt(ctx.db, body.job_id, node.id);
  if (!work || work.has_receipt) return undefined;
  return completionOf(ctx.completions, work).checkReceipt?.(ctx, work, body, inlineBytes);
}

/**
 * `POST /api/v1/node/work/{work_id}/outputs`: a kind 8 or 10 node declares its output manifest
 * and gets a presigned PUT URL per output, for work leased to it.
 */
export async function outputUploadUrls(ctx: ServiceContext, node: NodeRow, workId: string, body: unknown) {
  const work = await openWorkOf(ctx, node, workId);
  if (work.status !== 'leased')
    throw new ApiError('conflict', `work ${workId} is ${work.status}; no outputs are taken`);
  return ctx.completions.job.outputs(ctx, work, body);
}

/** A node reports it could not do the work: retryable -> back to the queue (3 attempts), else failed. */
export async function failWork(
  ctx: ServiceContext,
  node: NodeRow,
  workId: string,
  body: { message: string; retryable?: boolean },
) {
  await openWorkOf(ctx, node, workId);
  const requeued = await failAttempt(ctx, node, workId, body);
  return { message: requeued ? 'work failed; the job is queued again' : 'work failed' };
}

/**
 * Fails the attempt `workId` of `node` (leased or delivered; with `refused`, also a lapsed
 * attempt whose owner takes lapsed attempts, which a receipt may still complete) and has its owner decide what
 * follows; `refused` lowers the node's reputation in the same transaction. True when the owner
 * went back to the queue; 409 when the attempt had already ended.
 */
async function failAttempt(
  ctx: ServiceContext,
  node: NodeRow,
  workId: string,
  report: FailureReport,
  options: { refused?: boolean } = {},
): Promise<boolean> {
  const { work, requeued } = await ctx.db.transaction(async (tx) => {
    const locked = await findWork(tx, workId, true);
    const open =
      locked !== undefined &&
      (['leased', 'delivered'].includes(locked.status) ||
        (options.refused === true && locked.status === 'lost' && completionOf(ctx.completions, locked).takesLapsed));
    if (!locked || !open) throw new ApiError('conflict', `work ${workId} is ${locked?.status ?? 'gone'}`);
    await setWorkStatus(tx, workId, 'failed');
    if (options.refused) await lowerReputation(tx, node.id, REFUSED_RECEIPT_PENALTY);
    return { work: locked, requeued: await completionOf(ctx.completions, locked).fail(ctx, tx, locked, node, report) };
  });
  await completionOf(ctx.completions, work).afterFailure(ctx, work, requeued);
  return requeued;
}

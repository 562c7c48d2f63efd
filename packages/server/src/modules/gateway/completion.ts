import type { DirectCompletion } from '../work/completion.js';
import { noteWorkFailure } from '../work/store.js';
import { receiptIdOf } from '../receipts/store.js';
import { openingsSettled } from './attempts.js';
import { enqueueReceipt } from './flush.js';
import { requestUsage, unitsFitAudio } from './measured-audio.js';
import { boundOfRequest } from './metering.js';
import { rebuildOpening } from './rebuild.js';
import { completeFromReceipt, lockRequestOfWork, receiptFactsOf } from './settle.js';
import { requestsStillOn, type GatewayRequestRow } from './store.js';
import { checkTicket } from './ticket.js';

/**
 * How a gateway request ends when its attempt does: the gateway's implementation of the work
 * intake's completion interface for direct work (`DirectCompletion`, modules/work/completion.ts),
 * registered at start-up as `ctx.completions.direct`: a request's attempts are direct work,
 * leased straight to the node it routed to. The work's owner row is the gateway request; a receipt
 * completes it (gateway/settle.ts), a failure is noted on the work for the request's follow loop,
 * which fails over or ends it. A receipt the request waits for in this process is answered from
 * memory and its records are written by the gateway's own flush (gateway/flush.ts).
 */
export const requestCompletion: DirectCompletion<GatewayRequestRow, GatewayRequestRow> = {
  lockOwner: (_ctx, tx, work) => lockRequestOfWork(tx, work),

  // Opened with its bound in its metadata; a request rebuilt from a ticket has none (its maximum cost caps its charge).
  meteringBound: (request) => boundOfRequest(request),

  receiptFacts: (_ctx, tx, items) => receiptFactsOf(tx, items),

  complete: (ctx, tx, request, { work, node, receipt }) =>
    completeFromReceipt(ctx, tx, request, { work, node, receipt }),

  async afterReceipt(ctx, request, { receipt, output }) {
    // A gateway request waits for its receipt: here (handed over with the answer), or on another
    // instance (told over the bus; it reads the outcome from the store).
    const handedOver = ctx.hub.completed(receipt.work_id, {
      receiptId: receipt.id,
      request,
      ...(output ? { output } : {}),
    });
    if (!handedOver) await ctx.bus.publish('work', receipt.work_id);
    // The waiting client's answer goes out before this acknowledgement: its request runs on from
    // here in microtasks, and the node is not waiting on anyone (its result is stored).
    else await new Promise((resolve) => setImmediate(resolve));
  },

  async fail(_ctx, tx, work, _node, report) {
    // The request's follow loop reads the failure and fails over or ends the request.
    await noteWorkFailure(tx, work.id, report.message, report.retryable ?? false);
    return false;
  },

  async afterFailure(ctx, work) {
    await ctx.bus.publish('work', work.id);
  },

  // A lapsed attempt is the request's follow loop's to handle; its receipt may still come (intake.ts).
  lost: async () => false,
  takesLapsed: true,

  async settled(ctx, ids) {
    await openingsSettled(ctx.hub.attempts, ids);
    // A receipt this process answered from memory and is writing: whoever sends it again meets the stored one.
    await Promise.all(ids.map((id) => ctx.hub.attempts.pendingWrite(id)?.catch(() => undefined)));
  },

  lapsedStillOpen: (ctx, works) => requestsStillOn(ctx.db, works),

  async rebuild(ctx, tx, node, ticket, jobId) {
    const checked = checkTicket(ctx.secrets, ticket, { nodeId: node.id, requestId: jobId });
    return rebuildOpening(ctx, tx, node, checked);
  },

  acceptVerified(ctx, verified) {
    const { node, body, inline, inlineBytes } = verified;
    // A receipt over the request's bound is not answered from memory: the store's path refuses it
    // and fails the attempt over (work/intake.ts), the request still open here.
    // Nor one more than 1 s from a transcription's measured audio (measured-audio.ts).
    const withinBound = (row: GatewayRequestRow) =>
      body.metering_units <= (boundOfRequest(row) ?? Infinity) && unitsFitAudio(row, body.metering_units);
    const claimed = ctx.hub.attempts.claim(body.job_id, node.id, withinBound);
    if (!claimed) return undefined;
    const { row } = claimed;
    const workId = row.work_id ?? '';
    const receiptId = receiptIdOf(workId);
    const written = enqueueReceipt(ctx, verified);
    ctx.hub.attempts.writing(row.id, written);
    const usage = requestUsage(row, body.metering_units, inline.usage ?? null);
    ctx.hub.completed(workId, {
      receiptId,
      request: { ...row, status: 'completed', usage: usage as Record<string, number>, receipt_id: receiptId },
      output: inlineBytes,
    });
    return written;
  },

  streamsHere(ctx, workId, nodeId) {
    const running = ctx.hub.attempts.runningWork(workId);
    return running !== undefined && running.row.node_id === nodeId && running.row.stream;
  },

  emit: (ctx, workId, events) => ctx.hub.emitEvents(workId, events),
};

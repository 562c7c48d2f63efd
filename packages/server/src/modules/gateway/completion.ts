import { attestationSummary } from '../attestation/service.js';
import type { AttestationSummary } from '../attestation/summary.js';
import { receiptIdOf } from '../receipts/store.js';
import type { RequestCompletion } from '../work/completion.js';
import { noteWorkFailure } from '../work/store.js';
import { openingsSettled } from './attempts.js';
import { requestUsage, unitsFitAudio } from './measured-audio.js';
import { rebuildOpening } from './rebuild.js';
import { boundOfRequest } from './metering.js';
import { completeFromReceipt, completeManyFromReceipts, gatewayReceiptMetadata, lockRequestOfWork } from './settle.js';
import { lockGatewayRequests, requestsStillOn, type GatewayRequestRow } from './store.js';
import { checkTicket } from './ticket.js';
import { expectReceipts, stagedLeft, takeOpening, type StagedOpening } from './fresh.js';
import type { RunHead } from '../evidence/recorder.js';

/** The evidence run's head of a request row handed out by `takeFresh`, as its opening inserted it. */
const freshRuns = new WeakMap<GatewayRequestRow, RunHead>();
/** The unwritten opening of a request row handed out by `takeFresh` (staged: its receipt's batch writes it). */
const staged = new WeakMap<GatewayRequestRow, StagedOpening>();

/**
 * How a gateway request ends when its attempt does: the gateway's implementation of the work
 * intake's completion interface (modules/work/completion.ts), registered at start-up. The
 * request's owner row is the gateway request; a receipt completes it (gateway/settle.ts), a
 * failure is noted on the work for the request's follow loop, which fails over or ends it.
 */
export const requestCompletion: RequestCompletion<GatewayRequestRow, GatewayRequestRow> = {
  lockOwner: (_ctx, tx, work) => lockRequestOfWork(tx, work),

  // Opened with its bound in its metadata; a request rebuilt from a ticket has none (its hold caps it).
  meteringBound: (request) => boundOfRequest(request),

  async receiptFacts(_ctx, tx, items) {
    // Sovereign requests carry the attestation their node held, read once per node.
    const attested = new Map<string, AttestationSummary | null>();
    const out = [];
    for (const { owner, node } of items) {
      let attestation: AttestationSummary | null = null;
      if (owner.metadata.requires_tee === true) {
        if (!attested.has(node.id)) attested.set(node.id, await attestationSummary(tx, node.id));
        attestation = attested.get(node.id) ?? null;
      }
      out.push({ metadata: gatewayReceiptMetadata(owner, node), attestation });
    }
    return out;
  },

  takeFresh(tx, requestId, nodeId) {
    const opening = takeOpening(tx, requestId);
    if (!opening || opening.work.node_id !== nodeId) {
      // Staged for this receipt and not taken: the flush must not commit without it (see stagedLeft).
      if (opening && !opening.written) throw new Error(`the staged opening of ${requestId} is not this node's`);
      return undefined;
    }
    if (!opening.written) {
      staged.set(opening.request, opening);
      const { lease_seconds, dispatched, ...work } = opening.work;
      return { work, owner: opening.request, unwritten: { lease_seconds, dispatched } };
    }
    freshRuns.set(opening.request, opening.run);
    return { work: opening.work, owner: opening.request };
  },

  expectReceipts,

  complete(ctx, tx, request, { work, node, receipt }) {
    const run = freshRuns.get(request);
    return completeFromReceipt(ctx, tx, request, { work, node, receipt, ...(run ? { run } : {}) });
  },

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

  settled: (ctx, workIds) => openingsSettled(ctx.hub.attempts, workIds),

  lapsedStillOpen: (ctx, works) => requestsStillOn(ctx.db, works),

  async receiptWritten(ctx, workId) {
    await ctx.hub.attempts.pendingWrite(workId)?.catch(() => undefined);
  },

  async rebuild(ctx, tx, node, ticket, jobId) {
    const checked = checkTicket(ctx.secrets, ticket, { nodeId: node.id, requestId: jobId });
    return rebuildOpening(ctx, tx, node, checked);
  },

  completeInMemory(ctx, node, body, inline, output, write) {
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
    const written = write();
    ctx.hub.attempts.writing(row.id, written);
    const usage = requestUsage(row, body.metering_units, inline.usage ?? null);
    ctx.hub.completed(workId, {
      receiptId,
      request: { ...row, status: 'completed', usage: usage as Record<string, number>, receipt_id: receiptId },
      output,
    });
    return written;
  },

  async lockRunning(tx, works) {
    const requests = await lockGatewayRequests(
      tx,
      works.map((w) => w.job_id),
    );
    const running = new Map<string, GatewayRequestRow>();
    for (const work of works) {
      const request = requests.get(work.job_id);
      if (request && request.work_id === work.id && request.status === 'running') running.set(work.id, request);
    }
    return running;
  },

  async completeMany(ctx, tx, done) {
    await completeManyFromReceipts(
      ctx,
      tx,
      done.map((d) => {
        // Opened by this same flush (takeFresh): its run's head as inserted, not locked and read
        // back; or not written at all (staged), to be written once, completed.
        const run = freshRuns.get(d.owner);
        const opening = staged.get(d.owner);
        return {
          request: d.owner,
          work: d.work,
          node: d.node,
          receipt: d.receipt,
          ...(run ? { run } : {}),
          ...(opening ? { opening: { run: opening.run } } : {}),
        };
      }),
    );
    if (stagedLeft(tx) > 0) throw new Error('an opening of the flush was left unwritten by its receipt');
  },

  streamsHere(ctx, workId, nodeId) {
    const running = ctx.hub.attempts.runningWork(workId);
    return running !== undefined && running.row.node_id === nodeId && running.row.stream;
  },

  emit: (ctx, workId, events) => ctx.hub.emitEvents(workId, events),
};

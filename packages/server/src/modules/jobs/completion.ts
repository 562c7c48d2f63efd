import { meteringBound } from '@svc/protocol';
import { ApiError } from '../../platform/errors.js';
import { attestationSummary } from '../attestation/service.js';
import {
  checkCaptureReceipt,
  finishProcessing,
  isCaptureKind,
  outputUploads,
  releaseFromJob,
  type CaptureReceiptCheck,
} from '../capture/processing.js';
import { ledgerCharged, receiptEvents } from '../evidence/events.js';
import { recordEvents } from '../evidence/recorder.js';
import type { JobCompletion } from '../work/completion.js';
import { deliverArtifacts, enqueueTerminalWebhook } from './delivery.js';
import { closeJobRun, endedWithoutResult } from './evidence.js';
import { billedJobUnits } from './metered-audio.js';
import { afterLostAttempt } from './states.js';
import { addJobEvent, findJobById, moveJob, type JobRow } from './store.js';
import { readWorkResult } from '../work/results.js';

/**
 * How a job ends when its attempt does: the jobs' implementation of the work intake's completion
 * interface (modules/work/completion.ts), registered at start-up. A receipt settles the hold,
 * credits the operator and completes the job; a failure requeues it (up to three attempts) or
 * fails it and releases its hold.
 */
export const jobCompletion: JobCompletion<JobRow, JobRow | undefined> = {
  /**
   * A receipt for a kind 8 or 10 job is checked before its transaction (every output is read and
   * hashed, which must not hold row locks): its result is the output manifest, and its metering
   * what the server counts itself (capture/processing.ts). Undefined for any other work.
   */
  async checkReceipt(ctx, work, body, output): Promise<CaptureReceiptCheck | undefined> {
    if (!isCaptureKind(work.kind)) return undefined;
    const job = await findJobById(ctx.db, work.job_id);
    if (!job?.spec.capture_set_id) return undefined;
    const stored = output ? undefined : await readWorkResult(ctx, work.id);
    return checkCaptureReceipt(ctx, {
      workId: work.id,
      kind: work.kind,
      captureSetId: job.spec.capture_set_id,
      result: output ?? stored?.bytes,
      meteringUnits: body.metering_units,
      usage: body.result ? (body.result.usage ?? null) : work.usage,
    });
  },

  async lockOwner(_ctx, tx, work) {
    const job = await findJobById(tx, work.job_id, true);
    if (!job || job.work_id !== work.id || !['assigned', 'running'].includes(job.status)) {
      throw new ApiError('conflict', `job ${work.job_id} is no longer leased to this node`);
    }
    return job;
  },

  /** Per kind from the job's own inputs and time limit, and the node's cores (kind 5); none for kinds 8 and 10. */
  meteringBound: (job, node) =>
    // A transcription's audio was measured at submission (issue 41 point 5): bounded by it, not by its file size.
    job.kind === 3 && job.spec.measured_audio_ms !== undefined
      ? meteringBound({ type: 'transcription', audioSeconds: job.spec.measured_audio_ms / 1000 })
      : meteringBound({
          type: 'job',
          kind: job.kind,
          model: job.spec.model,
          inputs: job.spec.inputs ?? [],
          timeoutSeconds: job.spec.timeout_seconds,
          cores: node.cpu_cores,
        }),

  async receiptFacts(_ctx, tx, items) {
    const out = [];
    // Sovereign work carries the attestation the node held when it did the work (docs/attestation.md).
    for (const { owner, node } of items)
      out.push({
        metadata: {},
        attestation: owner.execution_pool === 'sovereign' ? await attestationSummary(tx, node.id) : null,
      });
    return out;
  },

  async complete(ctx, tx, job, { work, node, receipt, body, check }) {
    const capture = check as CaptureReceiptCheck | undefined;
    // A transcription is charged the audio the server measured; a receipt more than 1 s off is refused.
    const usageMicro = Math.ceil(billedJobUnits(job, body.metering_units) * work.price_micro_per_unit);
    // Buyer's and operator's accounts locked together, in org id order (billing's settleAndEarn).
    const closed = job.hold_id
      ? await ctx.ledger
          .within(tx)
          .settleAndEarn(
            job.hold_id,
            usageMicro,
            { description: `job ${job.id}: ${body.metering_units} units on ${node.id}`, ref: job.id },
            { orgId: node.org_id, options: { description: `job ${job.id} on ${node.id}`, ref: job.id } },
          )
      : undefined;
    const settlement = closed?.settlement ?? {
      charged_cents: 0,
      charged_micro: 0,
      free_micro: 0,
      released_cents: 0,
      transaction: null,
    };
    const earned = closed?.earning ?? null;
    const earning = earned?.cents ?? 0;
    const completed = await moveJob(tx, job.id, 'completed', {
      result_hash: body.result_hash,
      charged_cents: settlement.charged_cents,
      charged_micro: settlement.charged_micro,
    });
    await closeJobRun(tx, ctx.secrets, job, 'completed', [
      ...receiptEvents(receipt, node, work.id),
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
    return completed;
  },

  async afterReceipt(ctx, job, { receipt }) {
    if (!job) {
      await ctx.bus.publish('work', receipt.work_id);
      return;
    }
    if (job.spec.delivery_artifact_put_url || job.spec.delivery_manifest_put_url) {
      const blob = job.work_id ? await readWorkResult(ctx, job.work_id) : undefined;
      if (blob)
        void deliverArtifacts(ctx, job, blob, receipt.id).catch((err: unknown) =>
          ctx.log.error({ err, job_id: job.id }, 'artifact delivery failed'),
        );
    }
  },

  async fail(ctx, tx, work, node, report) {
    const workId = work.id;
    const job = await findJobById(tx, work.job_id, true);
    if (!job || job.work_id !== workId) return false;
    await addJobEvent(tx, job.id, 'job_attempt_failed', {
      node_id: node.id,
      work_id: workId,
      message: report.message,
      retryable: report.retryable ?? false,
    });
    const attemptFailed = {
      type: 'job.attempt_failed',
      summary: `${node.id} reported a failure: ${report.message}`.slice(0, 500),
      metadata: { node_id: node.id, work_id: workId, message: report.message, retryable: report.retryable ?? false },
    };
    const next = report.retryable ? afterLostAttempt(job.attempts) : 'failed';
    if (next === 'pending') {
      await moveJob(tx, job.id, 'pending', { node_id: null, work_id: null });
      await addJobEvent(tx, job.id, 'job_requeued', { attempt: job.attempts, reason: report.message });
      await recordEvents(tx, job.id, [
        attemptFailed,
        {
          type: 'job.requeued',
          summary: 'back in the queue for another node',
          metadata: { attempt: job.attempts, reason: report.message },
          causedBy: ['job.attempt_failed'],
        },
      ]);
      return true;
    }
    const failed = await moveJob(tx, job.id, 'failed', { failure_reason: report.message });
    if (job.hold_id) await ctx.ledger.within(tx).release(job.hold_id);
    if (job.spec.capture_set_id)
      await releaseFromJob(tx, job.spec.capture_set_id, { id: job.id, status: 'failed', reason: report.message });
    await addJobEvent(tx, job.id, 'job_failed', {
      reason: report.message,
      attempts: job.attempts,
      released_cents: job.budget_cents,
    });
    await closeJobRun(tx, ctx.secrets, job, 'failed', [
      attemptFailed,
      ...endedWithoutResult(
        job,
        'job.failed',
        `failed after ${job.attempts} attempt(s): ${report.message}`.slice(0, 500),
        { reason: report.message, attempts: job.attempts },
      ),
    ]);
    if (failed) await enqueueTerminalWebhook(tx, failed);
    return false;
  },

  // A job's lost attempt goes back to the queue (`lost`): its late receipt is refused.
  takesLapsed: false,

  async lost(ctx, tx, work) {
    const job = await findJobById(tx, work.job_id, true);
    if (!job || job.work_id !== work.id || !['assigned', 'running'].includes(job.status)) return false;
    const next = afterLostAttempt(job.attempts);
    await addJobEvent(tx, job.id, 'job_lease_lost', {
      node_id: work.node_id,
      work_id: work.id,
      attempt: job.attempts,
    });
    const lost = {
      type: 'job.lease_lost',
      summary: `${work.node_id} stopped renewing its lease on attempt ${job.attempts}`,
      metadata: { node_id: work.node_id, work_id: work.id, attempt: job.attempts },
    };
    if (next === 'pending') {
      await moveJob(tx, job.id, 'pending', { node_id: null, work_id: null });
      await addJobEvent(tx, job.id, 'job_requeued', { attempt: job.attempts, reason: 'lease expired' });
      await recordEvents(tx, job.id, [
        lost,
        {
          type: 'job.requeued',
          summary: 'back in the queue for another node',
          metadata: { attempt: job.attempts, reason: 'lease expired' },
          causedBy: ['job.lease_lost'],
        },
      ]);
      return true;
    } else {
      const failed = await moveJob(tx, job.id, 'failed', {
        failure_reason: `no node completed it in ${job.attempts} attempts`,
      });
      if (job.hold_id) await ctx.ledger.within(tx).release(job.hold_id);
      if (job.spec.capture_set_id)
        await releaseFromJob(tx, job.spec.capture_set_id, {
          id: job.id,
          status: 'failed',
          reason: `no node completed it in ${job.attempts} attempts`,
        });
      await addJobEvent(tx, job.id, 'job_failed', {
        reason: 'lease expired on the last attempt',
        attempts: job.attempts,
        released_cents: job.budget_cents,
      });
      await closeJobRun(tx, ctx.secrets, job, 'failed', [
        lost,
        ...endedWithoutResult(job, 'job.failed', `failed: no node completed it in ${job.attempts} attempts`, {
          reason: 'lease expired on the last attempt',
          attempts: job.attempts,
        }),
      ]);
      if (failed) await enqueueTerminalWebhook(tx, failed);
    }
    return false;
  },

  async afterFailure(ctx, work, requeued) {
    if (requeued) await ctx.bus.publish('jobs', work.job_id);
  },

  async started(ctx, node, work) {
    for (const row of work) {
      // The move and its events commit together: a kill -9 between them left a running job
      // whose evidence run never said it started.
      await ctx.db.transaction(async (tx) => {
        if (!(await moveJob(tx, row.job_id, 'running'))) return;
        await addJobEvent(tx, row.job_id, 'job_running', { node_id: node.id, work_id: row.id });
        await recordEvents(tx, row.job_id, [
          {
            type: 'job.started',
            summary: `${node.id} reported it is running the work`,
            metadata: { node_id: node.id, work_id: row.id },
          },
        ]);
      });
    }
  },

  outputs: (ctx, work, body) => outputUploads(ctx, work, body),
};

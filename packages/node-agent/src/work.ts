import { ProtocolError } from '@svc/protocol';
import { abortReason, type BackoffPolicy, type Sooner } from './backoff.js';
import type { NodeClient } from './client.js';
import { deliverEntry, withRetries } from './delivery.js';
import { EngineError } from './engines/interface.js';
import type { NodeIdentity } from './identity.js';
import { sealResult, type Outbox, type OutboxEntry } from './outbox.js';
import { runJob } from './runners/index.js';
import { createStreamSink } from './stream-events.js';
import { WorkError, type RunContext, type RunOutput } from './runners/types.js';
import type { ReceiptMetadata, WorkItem } from './wire.js';

/** How one work item ended, as the agent reports it (one `work` event per item). */
export type WorkOutcome =
  | 'completed' // result and receipt delivered
  | 'failed' // the work failed; reported with POST .../fail
  | 'cancelled' // the heartbeat answer listed it: stopped, nothing uploaded
  | 'interrupted' // the agent stopped first; reported as a retryable failure
  | 'undelivered' // signed and kept in the outbox; delivered at the next start
  | 'refused'; // the server refused the result or receipt; kept in outbox/rejected

/** What the agent tells its host (the CLI prints these as JSON lines). */
export type AgentEvent =
  | { event: 'registered'; node_id: string; server: string; country?: string; models: string[] }
  | {
      event: 'work';
      work_id: string;
      job_id: string;
      type?: string;
      kind?: number;
      model?: string;
      outcome: WorkOutcome;
      duration_ms?: number;
      metering_units?: number;
      result_hash?: string;
      retryable?: boolean;
      message?: string;
    }
  | { event: 'attested'; attestation: string; verified: boolean; failed: string[]; expires_at: string | null }
  | { event: 'warning'; message: string; work_id?: string };

/** A work item the agent is running or delivering, with what stops it. */
export interface TrackedWork {
  work_id: string;
  job_id: string;
  item?: WorkItem;
  controller: AbortController;
  phase: 'running' | 'delivering';
  /** Why it was aborted, once it was. */
  reason?: 'cancelled' | 'shutdown';
}

/** What {@link processWork} needs from the agent. */
export interface WorkDeps {
  client: NodeClient;
  identity: NodeIdentity;
  outbox: Outbox;
  run: Omit<RunContext, 'signal'>;
  metadata: Pick<ReceiptMetadata, 'gpu_model' | 'country' | 'region'>;
  backoff: BackoffPolicy;
  /** Wakes uploads waiting out a backoff when the channel reopens (delivery.ts, `RetryOptions.sooner`). */
  sooner?: Sooner;
  deliveryDeadlineMs: number;
  emit: (event: AgentEvent) => void;
  isStopping: () => boolean;
  /** The run phase is over: the slot is free for other work. */
  onRunFinished: (work: TrackedWork) => void;
}

function describeFailure(err: unknown): { message: string; retryable: boolean } {
  if (err instanceof WorkError || err instanceof EngineError) return { message: err.message, retryable: err.retryable };
  if (err instanceof ProtocolError) return { message: `cannot sign the result: ${err.message}`, retryable: false };
  return { message: err instanceof Error ? err.message : String(err), retryable: true };
}

function itemFields(work: TrackedWork) {
  const item = work.item;
  return {
    work_id: work.work_id,
    job_id: work.job_id,
    ...(item ? { type: item.type } : {}),
    ...(item?.kind === undefined ? {} : { kind: item.kind }),
    ...(typeof item?.model === 'string' ? { model: item.model } : {}),
  };
}

/**
 * Reports a failure with `POST .../fail`, retrying briefly (10 s while stopping). A failure to
 * report is only a warning: the lease then expires and the server re-queues the job anyway.
 *
 * @example
 * await reportFailure(deps, 'wrk_1', 'model tinyllama is not served by this node', false);
 */
export async function reportFailure(
  deps: WorkDeps,
  workId: string,
  message: string,
  retryable: boolean,
): Promise<void> {
  const body = { message: (message.trim() || 'the work failed').slice(0, 1000), retryable };
  const deadlineMs = deps.isStopping() ? 10_000 : deps.deliveryDeadlineMs;
  const r = await withRetries(() => deps.client.failWork(workId, body), {
    backoff: deps.backoff,
    deadlineMs,
    sooner: deps.sooner,
  }).catch((err: unknown) => ({
    ok: false as const,
    error: err instanceof Error ? err : new Error(String(err)),
  }));
  if (!r.ok)
    deps.emit({ event: 'warning', work_id: workId, message: `could not report the failure: ${r.error.message}` });
}

/**
 * Gateway work (chat, embeddings, transcription, image): a client is waiting for it now, so its
 * result travels inside the receipt call (one request instead of two), and its outbox entry is
 * written without fsync (a `kill -9` of the node keeps it; a power cut may not). The entry stays
 * until the server acknowledges the receipt, and is sent again after a reconnect or a restart:
 * the server applies a receipt at most once (docs/node-protocol.md, "The node channel").
 */
export function isGatewayWork(item: Pick<WorkItem, 'type'>): boolean {
  return item.type !== 'job';
}

/**
 * Runs one work item to its end: run it, sign the result into the outbox (before any upload;
 * gateway work skips the outbox, see {@link isGatewayWork}), deliver result and receipt, and
 * report the outcome; or report the failure.
 *
 * @example
 * await processWork({ work_id, job_id, item, controller: new AbortController(), phase: 'running' }, deps);
 */
export async function processWork(work: TrackedWork, deps: WorkDeps): Promise<void> {
  const { item, controller } = work;
  if (item === undefined) throw new Error('processWork needs the work item');
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  let run: RunOutput;
  let entry: OutboxEntry;
  // Streamed work posts its events as it runs; `cancel` in an answer stops it like a heartbeat would.
  const events = item.stream
    ? createStreamSink(deps.client, item.work_id, {
        signal: controller.signal,
        onCancel: () => {
          work.reason = 'cancelled';
          controller.abort(new Error('cancelled by the control plane'));
        },
      })
    : undefined;
  try {
    run = await runJob(item, { ...deps.run, signal: controller.signal, ...(events ? { events } : {}) });
    if (controller.signal.aborted) throw abortReason(controller.signal);
    const metadata: ReceiptMetadata = {
      ...(typeof item.model === 'string' ? { model: item.model } : {}),
      engine: run.engine,
      ...(run.runner === undefined ? {} : { runner: run.runner }),
      ...(run.image === undefined ? {} : { image: run.image }),
      ...deps.metadata,
      duration_ms: elapsed(),
      ...(run.exit_code === undefined ? {} : { exit_code: run.exit_code }),
    };
    entry = sealResult({ item, run, identity: deps.identity, metadata });
    await deps.outbox.put(entry, { durable: !isGatewayWork(item) });
  } catch (err) {
    work.phase = 'delivering';
    deps.onRunFinished(work);
    if (controller.signal.aborted && work.reason === 'cancelled') {
      deps.emit({ event: 'work', ...itemFields(work), outcome: 'cancelled', duration_ms: elapsed() });
      return;
    }
    const interrupted = controller.signal.aborted;
    const { message, retryable } = interrupted
      ? { message: 'the node shut down before the work finished', retryable: true }
      : describeFailure(err);
    await reportFailure(deps, work.work_id, message, retryable);
    deps.emit({
      event: 'work',
      ...itemFields(work),
      outcome: interrupted ? 'interrupted' : 'failed',
      duration_ms: elapsed(),
      retryable,
      message,
    });
    return;
  }
  work.phase = 'delivering';
  deps.onRunFinished(work);
  await deliverWork(work, entry, deps, elapsed());
}

/**
 * Delivers an outbox entry (fresh, or left by an earlier run) and settles the outbox file:
 * removed when delivered or cancelled, moved to `rejected/` when refused, kept otherwise (sent
 * again when the node channel reconnects, or at the next start). Gateway work's result goes
 * inside the receipt call.
 *
 * @example
 * await deliverWork(work, entry, deps);
 */
export async function deliverWork(
  work: TrackedWork,
  entry: OutboxEntry,
  deps: WorkDeps,
  duration_ms?: number,
): Promise<void> {
  const fields = {
    ...itemFields(work),
    metering_units: entry.metering_units,
    result_hash: entry.result_hash,
    ...(duration_ms === undefined ? {} : { duration_ms }),
  };
  const signal = work.controller.signal;
  const onRetry = (error: Error, delayMs: number) =>
    deps.emit({
      event: 'warning',
      work_id: work.work_id,
      message: `upload failed (${error.message}); retrying in ${delayMs} ms`,
    });
  // Gateway work (also re-sent from the outbox after a restart, when only its ticket says so: the
  // server may know nothing of that work but what the receipt's ticket rebuilds).
  const inline = (work.item !== undefined && isGatewayWork(work.item)) || entry.receipt.ticket !== undefined;
  const delivery = await deliverEntry(deps.client, entry, {
    backoff: deps.backoff,
    deadlineMs: deps.deliveryDeadlineMs,
    signal,
    onRetry,
    inline,
    sooner: deps.sooner,
  }).catch((err: unknown) => {
    if (signal.aborted) return undefined;
    throw err;
  });
  if (delivery === undefined) {
    if (work.reason === 'cancelled') {
      await deps.outbox.remove(work.work_id);
      deps.emit({ event: 'work', ...fields, outcome: 'cancelled' });
    } else {
      deps.emit({
        event: 'work',
        ...fields,
        outcome: 'undelivered',
        message: 'the node stopped during the upload; it resumes at the next start',
      });
    }
    return;
  }
  if (delivery.outcome === 'delivered') {
    await deps.outbox.remove(work.work_id);
    const conflicts =
      delivery.conflicts.length > 0
        ? { message: `409 counted as already delivered: ${delivery.conflicts.join('; ')}` }
        : {};
    deps.emit({ event: 'work', ...fields, outcome: 'completed', ...conflicts });
  } else if (delivery.outcome === 'refused') {
    await deps.outbox.reject(work.work_id);
    deps.emit({
      event: 'work',
      ...fields,
      outcome: 'refused',
      message: `${delivery.step}: ${delivery.error.status} ${delivery.error.message}`,
    });
  } else {
    deps.emit({
      event: 'work',
      ...fields,
      outcome: 'undelivered',
      message: `${delivery.step}: ${delivery.error.message}; kept in the outbox until the channel reconnects or the next start`,
    });
  }
}

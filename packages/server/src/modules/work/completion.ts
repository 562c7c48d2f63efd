import type { Static } from '@sinclair/typebox';
import type {
  OutputUploadsSchema,
  ReceiptUploadWire,
  ResultUploadWire,
  StreamEventWire,
  WorkFailRequestWire,
  WorkTicketWire,
} from '@svc/protocol';
import type { ServiceContext } from '../../service-context.js';
import type { Queryable } from '../../platform/db/index.js';
import type { NodeRow } from '../nodes/store.js';
import type { ReceiptRow } from '../receipts/store.js';
import type { WorkRow } from './store.js';

/**
 * The one completion interface of work items (DESIGN.md section 9, issue 22 point 5). The node
 * protocol's intake (receipts, results, failures, lost leases) is written once, here in
 * modules/work; what a work item's owner does when its attempt ends is not. Work is of two kinds:
 * a job's attempt (`type: 'job'`), which a node claims, and direct work (every other type),
 * leased straight to one node by its owner, which follows it. Each kind's owner implements
 * {@link WorkCompletion}, and the context registers both at start-up ({@link WorkOwners},
 * context.ts). The intake calls them and imports neither, so this module sits below the modules
 * that own work.
 */

type OutputUploadsWire = Static<typeof OutputUploadsSchema>;

/** The body of `POST /api/v1/node/work/{work_id}/result`, also carried inline by a receipt as `result`. */
export type ResultUpload = ResultUploadWire;

/** A node's SVC1 receipt as the intake takes it (`POST /api/v1/node/receipt`, the channel's `receipt`). */
export type ReceiptBody = ReceiptUploadWire;

/** A node's report that it could not do the work (`POST /api/v1/node/work/{work_id}/fail`). */
export type FailureReport = WorkFailRequestWire;

/** What the server records beside a receipt for its owner (outside the SVC1 signature). */
export interface ReceiptFacts {
  /** The owner's part of the receipt's metadata. */
  metadata: Record<string, unknown>;
  /** Sovereign work: the attestation the node held when it did the work (docs/attestation.md). */
  attestation: unknown;
}

/** A receipt the intake has checked and stored, for its owner to complete from (in the same transaction). */
export interface Receipted {
  work: WorkRow;
  /** The node, with the attestation of {@link ReceiptFacts} when it had one. */
  node: NodeRow;
  receipt: ReceiptRow;
  body: ReceiptBody;
  /** What {@link WorkCompletion.checkReceipt} returned before the transaction. */
  check: unknown;
}

/**
 * What the owner of a work item does when its attempt ends. `Owner` is the owner's row, locked by
 * {@link lockOwner} in the intake's transaction; `Done` what {@link complete} returns to
 * {@link afterReceipt} once the transaction committed.
 */
export interface WorkCompletion<Owner = unknown, Done = unknown> {
  /**
   * Before the receipt's transaction (reads that must not hold row locks): checks the
   * item-specific parts of a receipt for `work` (leased to the node, no receipt yet). Its value
   * is handed to {@link complete} as `check`.
   */
  checkReceipt?(ctx: ServiceContext, work: WorkRow, body: ReceiptBody, output: Buffer | undefined): Promise<unknown>;
  /**
   * In the receipt's transaction, after the work row's lock: the owner's row, locked; throws (409)
   * when the work is no longer the owner's current attempt.
   */
  lockOwner(ctx: ServiceContext, tx: Queryable, work: WorkRow): Promise<Owner>;
  /**
   * The most `metering_units` a receipt for the owner's work may sign (@svc/protocol
   * `meteringBound`), undefined when the owner sets none. The intake refuses a receipt above it
   * (issue 40 point 6): nothing is charged, the attempt fails as a retryable failure, and the
   * node's reputation is lowered.
   */
  meteringBound(owner: Owner, node: NodeRow): number | undefined;
  /** The receipt's metadata and attestation for each `{ owner, node }`, in order. */
  receiptFacts(
    ctx: ServiceContext,
    tx: Queryable,
    items: readonly { owner: Owner; node: NodeRow }[],
  ): Promise<ReceiptFacts[]>;
  /** Completes the owner from its stored receipt, in the intake's transaction: charge, close, evidence. */
  complete(ctx: ServiceContext, tx: Queryable, owner: Owner, receipted: Receipted): Promise<Done>;
  /** After the receipt's commit (`output`: the result's bytes when the receipt carried them). */
  afterReceipt(ctx: ServiceContext, done: Done, after: { receipt: ReceiptRow; output?: Buffer }): Promise<void>;
  /**
   * The node reported a failure of `work` (locked, already marked `failed`), in the intake's
   * transaction. True when the owner goes back to the queue.
   */
  fail(ctx: ServiceContext, tx: Queryable, work: WorkRow, node: NodeRow, report: FailureReport): Promise<boolean>;
  /** After a failure's commit (`requeued`: what {@link fail} answered). */
  afterFailure(ctx: ServiceContext, work: WorkRow, requeued: boolean): Promise<void>;
  /**
   * The lease of `work` expired (locked, already marked `lost`), in the sweep's transaction. True
   * when the owner goes back to the queue (the sweep then announces it: bus `jobs`, its `job_id`).
   */
  lost(ctx: ServiceContext, tx: Queryable, work: WorkRow): Promise<boolean>;
  /**
   * Whether an attempt whose lease lapsed (`lost`) still takes its result and receipt, for as long
   * as the owner still runs on it (`lockOwner` decides): the owner did not go back to a queue, and
   * its client may have had the answer. False when a lost attempt's owner was queued again.
   */
  readonly takesLapsed: boolean;
}

/** A work item and its owner as the transaction applying a receipt itself inserted them (neither locked nor read again). */
export interface FreshWork<Owner = unknown> {
  work: WorkRow;
  owner: Owner;
}

/** A receipt whose key, SVC1 signature and inline result (bytes against their hash) the intake checked. */
export interface VerifiedReceipt {
  node: NodeRow;
  body: ReceiptBody;
  inline: ResultUpload;
  inlineBytes: Buffer;
}

/**
 * The completion of direct work, beyond the base interface: the owner follows each attempt in
 * memory on the instance that leased it, and writes its own records, so the intake asks it first.
 * Six members, nothing about how the owner writes.
 */
export interface DirectCompletion<Owner = unknown, Done = unknown> extends WorkCompletion<Owner, Done> {
  /**
   * Waits for this process's writes in flight that store these items (owner or work ids): an
   * owner's opening queued behind its work's dispatch, a receipt answered from memory and being
   * written.
   */
  settled(ctx: ServiceContext, ids: readonly string[]): Promise<void>;
  /**
   * Of lapsed attempts (`lost`, no receipt yet) that their node still lists, those whose owner
   * still runs on them: the node is not told to stop them and re-sends their receipts, which the
   * intake still takes (a signed receipt is never thrown away for money reasons).
   */
  lapsedStillOpen(ctx: ServiceContext, works: readonly { id: string; job_id: string }[]): Promise<string[]>;
  /**
   * Unknown work whose receipt carries a ticket: its owner's opening was lost before it committed;
   * the checked ticket rebuilds both in `tx`. True when rebuilt.
   */
  rebuild(ctx: ServiceContext, tx: Queryable, node: NodeRow, ticket: WorkTicketWire, jobId: string): Promise<boolean>;
  /**
   * A verified receipt with its result inline: when the owner waits in this process on this
   * node's attempt, it answers its client at once and returns the write of the receipt's
   * records (its own, settled once committed). Undefined when memory cannot decide: the intake's
   * transactional path applies it instead.
   */
  acceptVerified(ctx: ServiceContext, receipt: VerifiedReceipt): Promise<ReceiptRow> | undefined;
  /** Whether `workId` is the running, streamed attempt on `nodeId` of an owner this process follows. */
  streamsHere(ctx: ServiceContext, workId: string, nodeId: string): boolean;
  /** Forwards a node's stream events to the owner that waits for them (on any instance). */
  emit(ctx: ServiceContext, workId: string, events: StreamEventWire[]): Promise<void>;
}

/** The jobs' completion, and the parts of the node protocol only jobs have. */
export interface JobCompletion<Owner = unknown, Done = unknown> extends WorkCompletion<Owner, Done> {
  /** A heartbeat says the node runs these items of job work: each job moves to `running` (once). */
  started(ctx: ServiceContext, node: NodeRow, work: readonly { id: string; job_id: string }[]): Promise<void>;
  /** `POST /api/v1/node/work/{work_id}/outputs`: a presigned PUT URL per declared output of leased work. */
  outputs(ctx: ServiceContext, work: WorkRow, body: unknown): Promise<OutputUploadsWire>;
}

/**
 * The completions registered at start-up, one per owner of work items, and the scheduler's claim
 * of pending jobs for a node's poll (`scheduler/service.ts` `claimJobs`).
 */
export interface WorkOwners {
  job: JobCompletion;
  direct: DirectCompletion;
  /** Assigns up to `max` pending jobs `node` is eligible for; `noneEligible` when it had room and none fits. */
  claimJobs(ctx: ServiceContext, node: NodeRow, max: number): Promise<{ work: WorkRow[]; noneEligible: boolean }>;
}

/**
 * How the error of work whose receipt the intake refused begins (over its metering bound): the
 * owner bills nothing of what the node claimed for it (a streamed attempt ends with an error).
 */
export const RECEIPT_REFUSED = 'receipt refused: ';

/**
 * Whether the work failed because the intake refused its receipt.
 *
 * @example
 * receiptRefused({ error: 'receipt refused: metering_units 9 exceed this work\'s bound of 5' }); // true
 */
export function receiptRefused(state: { error: string | null }): boolean {
  return state.error?.startsWith(RECEIPT_REFUSED) ?? false;
}

/** The completion of a work item: its job's for `type: 'job'`, else its direct owner's. */
export function completionOf(owners: WorkOwners, work: Pick<WorkRow, 'type'>): WorkCompletion {
  return work.type === 'job' ? owners.job : owners.direct;
}

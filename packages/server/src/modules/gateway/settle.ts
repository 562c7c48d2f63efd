import type { ModelUsage } from '@svc/protocol';
import type { ServiceContext } from '../../service-context.js';
import type { Queryable } from '../../platform/db/index.js';
import { ApiError } from '../../platform/errors.js';
import type { NodeRow } from '../nodes/store.js';
import { attestationSummary } from '../attestation/service.js';
import type { AttestationSummary } from '../attestation/summary.js';
import type { ReceiptFacts } from '../work/completion.js';
import { ledgerCharged, ledgerReleased, receiptEvents } from '../evidence/events.js';
import {
  closeDerivedRuns,
  closeRun,
  closeRuns,
  openAndCloseRuns,
  type EvidenceEvent,
  type RunHead,
} from '../evidence/recorder.js';
import { batchesOf, derivedRunId, describeUsage, eventsDerived, storeDerivedEvents } from './evidence-derived.js';
import type { HoldClosing, ReservedCharging } from '../billing/service.js';
import type { NewRun } from '../evidence/store.js';
import type { ReceiptRow } from '../receipts/store.js';
import { cancelOpenWork, workState, type WorkRow } from '../work/store.js';
import { openingsSettled } from './attempts.js';
import type { OpeningRun } from './opening.js';
import { checkRequestAudio, requestUsage } from './measured-audio.js';
import { costMicro } from './pricing.js';
import {
  closeGatewayRequest,
  completeGatewayRequests,
  findGatewayRequest,
  insertCompletedGatewayRequests,
  type GatewayRequestRow,
  type GatewayStatus,
} from './store.js';

/**
 * How a gateway request ends and what it is charged. Every path (receipt, client gone, node
 * failure, timeout) closes the request once: the request row is locked and must still be
 * `running`, and its hold is settled or released in the same transaction. Locks are taken work
 * row first, then request row, in every path, as `submitReceipt` does.
 */

/**
 * The gateway request a receipt completes, locked. 409 when the work is no longer the request's
 * current attempt (it was superseded by a failover) or the request already ended.
 */
export async function lockRequestOfWork(
  tx: Queryable,
  work: Pick<WorkRow, 'id' | 'job_id'>,
): Promise<GatewayRequestRow> {
  const request = await findGatewayRequest(tx, work.job_id, true);
  if (!request) throw new ApiError('not_found', `no gateway request ${work.job_id}`);
  if (request.work_id !== work.id || request.status !== 'running') {
    throw new ApiError(
      'conflict',
      `gateway request ${request.id} is ${request.status === 'running' ? 'served by another attempt' : request.status}; no receipt is accepted for this work`,
    );
  }
  return request;
}

/**
 * What the server records beside a gateway receipt (outside the SVC1 signature): where it ran,
 * what was asked, and the request's audit facts (for a grounded chat, the retrieved chunks).
 */
export function gatewayReceiptMetadata(request: GatewayRequestRow, node: NodeRow): Record<string, unknown> {
  const asked = request.metadata;
  const audit =
    typeof asked.audit === 'object' && asked.audit !== null && !Array.isArray(asked.audit)
      ? (asked.audit as Record<string, unknown>)
      : {};
  return {
    ...audit,
    request_type: request.type,
    model: request.model,
    node_id: node.id,
    gpu_model: node.gpu_model,
    country: node.country,
    region: node.region,
    // What the request's derived evidence names the node by (evidence-derived.ts).
    attestation_verified: node.attestation_verified,
    jurisdiction: asked.jurisdiction ?? null,
    strict_jurisdiction: asked.strict_jurisdiction ?? null,
    requires_tee: asked.requires_tee ?? false,
  };
}

/**
 * Where a request's maximum cost was set aside, as its row keeps it (`metadata.credit`): the
 * instance whose credit reservation it was taken from in memory (null: none, a request rebuilt
 * from its ticket) and the cents, which cap its charge. No hold row (DESIGN.md section 7, revised
 * 2026-11-27).
 */
export interface RequestCredit {
  instance_id: string | null;
  cents: number;
}

/** The request's {@link RequestCredit}; undefined for a request opened with a hold (before 2026-11-28), or with neither. */
export function creditOf(request: Pick<GatewayRequestRow, 'metadata'>): RequestCredit | undefined {
  const c = request.metadata.credit;
  if (typeof c !== 'object' || c === null) return undefined;
  const { instance_id, cents } = c as Record<string, unknown>;
  if (typeof cents !== 'number' || !Number.isSafeInteger(cents) || cents < 0) return undefined;
  return { instance_id: typeof instance_id === 'string' ? instance_id : null, cents };
}

/** The ledger's postings for a request charged `usage` (and its node's earning): as one charge and as its hold's settling. */
function chargePostings(request: GatewayRequestRow, what: string, node: Pick<NodeRow, 'id' | 'org_id'> | undefined) {
  return {
    options: { description: `${request.type} ${request.model}: ${what}`, ref: request.id },
    earn: node && {
      orgId: node.org_id,
      options: { description: `${request.type} ${request.id} on ${node.id}`, ref: request.id },
    },
  };
}

/** The ledger's entry charging `request` `micro` from the reservation its `credit` names (`chargeReserved`). */
function reservedCharging(
  request: GatewayRequestRow,
  credit: RequestCredit | undefined,
  micro: number,
  { options, earn }: ReturnType<typeof chargePostings>,
): ReservedCharging {
  return {
    orgId: request.org_id,
    instanceId: credit?.instance_id ?? null,
    usageMicro: micro,
    capCents: credit?.cents ?? 0,
    options,
    ...(earn ? { earn } : {}),
  };
}

/**
 * The receipt facts (work/completion.ts `ReceiptFacts`) of gateway receipts: what the server
 * records beside each (`gatewayReceiptMetadata`) and, for a sovereign request, the attestation its
 * node held, read once per node.
 */
export async function receiptFactsOf(
  tx: Queryable,
  items: readonly { owner: GatewayRequestRow; node: NodeRow }[],
): Promise<ReceiptFacts[]> {
  const attested = new Map<string, AttestationSummary | null>();
  const out: ReceiptFacts[] = [];
  for (const { owner, node } of items) {
    let attestation: AttestationSummary | null = null;
    if (owner.metadata.requires_tee === true) {
      if (!attested.has(node.id)) attested.set(node.id, await attestationSummary(tx, node.id));
      attestation = attested.get(node.id) ?? null;
    }
    out.push({ metadata: gatewayReceiptMetadata(owner, node), attestation });
  }
  return out;
}

/**
 * Logs a charge cut to the credit left: the reservation its maximum cost was taken from is gone
 * (its instance died and the reservation was reclaimed and spent) or never was (rebuilt from its
 * ticket), and the unreserved balance could not cover it (docs/billing.md, "Charges cut short").
 */
function warnCut(
  ctx: ServiceContext,
  request: GatewayRequestRow,
  usageMicro: number,
  outcome: { charged_micro: number },
) {
  ctx.log.warn(
    { request_id: request.id, org_id: request.org_id, usage_micro: usageMicro, charged_micro: outcome.charged_micro },
    'gateway: a charge was cut to the credit left; the request is charged at most what was there',
  );
}

/**
 * Charges the request `usage` and credits the serving node's organization its earning: drawn from
 * the reservation its credit was taken from (no hold), or, for a request opened with a hold, by
 * settling (or releasing) that hold. Returns the charge (whole cents and exact micro-CAD) and the
 * ledger's evidence event.
 */
async function charge(
  ctx: ServiceContext,
  tx: Queryable,
  request: GatewayRequestRow,
  usage: ModelUsage,
  node: Pick<NodeRow, 'id' | 'org_id'> | undefined,
  what: string,
  cause: string,
) {
  const credit = creditOf(request);
  if (!request.hold_id && !credit) return { charged: 0, chargedMicro: 0, events: [] };
  const micro = costMicro(request.model, usage);
  const { options, earn } = chargePostings(request, what, node);
  const ledger = ctx.ledger.within(tx);
  if (!request.hold_id) {
    if (micro === 0) return { charged: 0, chargedMicro: 0, events: [] };
    const [outcome] = await ledger.chargeReserved([reservedCharging(request, credit, micro, { options, earn })]);
    if (!outcome) throw new Error('the ledger charged nothing');
    if (outcome.cut) warnCut(ctx, request, micro, outcome);
    return {
      charged: outcome.charged_cents,
      chargedMicro: outcome.charged_micro,
      events: [ledgerCharged(null, outcome, outcome.earning?.transaction ?? null, cause)],
    };
  }
  // A request opened with a hold (before 2026-11-28): its hold is settled or released.
  if (micro === 0) {
    const { released_cents } = await ledger.release(request.hold_id);
    return { charged: 0, chargedMicro: 0, events: [ledgerReleased(request.hold_id, released_cents, cause)] };
  }
  const { settlement: settled, earning: earned } = earn
    ? await ledger.settleAndEarn(request.hold_id, micro, options, earn)
    : { settlement: await ledger.settle(request.hold_id, micro, options), earning: null };
  return {
    charged: settled.charged_cents,
    chargedMicro: settled.charged_micro,
    events: [ledgerCharged(request.hold_id, settled, earned?.transaction ?? null, cause)],
  };
}

/**
 * Completes a gateway request from its accepted receipt, inside `submitReceipt`'s transaction:
 * charges the signed units (a transcription: the audio the server measured) at the catalogue
 * price (the hold caps it), credits the operator its earning and closes the request. Returns the
 * request row as it now stands.
 */
export async function completeFromReceipt(
  ctx: ServiceContext,
  tx: Queryable,
  request: GatewayRequestRow,
  done: { work: Pick<WorkRow, 'id' | 'usage'>; node: NodeRow; receipt: ReceiptRow; run?: RunHead },
): Promise<GatewayRequestRow> {
  // A transcription is charged the audio the server measured; a receipt more than 1 s off is refused.
  checkRequestAudio(request, done.receipt.metering_units);
  const usage = requestUsage(request, done.receipt.metering_units, done.work.usage);
  const { charged, chargedMicro, events } = await charge(
    ctx,
    tx,
    request,
    usage,
    done.node,
    `${describeUsage(usage)} on ${done.node.id}`,
    'receipt.verified',
  );
  const closed = {
    status: 'completed' as const,
    usage: usage as Record<string, number>,
    charged_cents: charged,
    charged_micro: chargedMicro,
    receipt_id: done.receipt.id,
    completed_at: new Date(),
  };
  await closeGatewayRequest(tx, request.id, closed);
  const summary = `${request.type} ${request.model}, completed`;
  if (eventsDerived(request)) {
    await closeDerivedRuns(tx, [derivedClosing({ ...request, ...closed }, done.receipt, events, summary)], false);
    return { ...request, ...closed };
  }
  await closeRun(
    tx,
    ctx.secrets,
    request.id,
    [
      ...receiptEvents(done.receipt, done.node, done.work.id),
      ...events,
      {
        type: 'request.completed',
        summary: `completed on ${done.node.id}: ${describeUsage(usage) || 'no usage'}`,
        metadata: { receipt_id: done.receipt.id, usage, charged_cents: charged },
        causedBy: ['receipt.verified'],
      },
    ],
    summary,
    done.run,
  );
  return { ...request, ...closed };
}

/**
 * The closing of a request's derived run: its events derived from the request as closed, its
 * receipt and the ledger's event of its closing (what its ledger rows say: evidence-derived.ts).
 */
function derivedClosing(
  request: GatewayRequestRow,
  receipt: ReceiptRow,
  ledger: readonly EvidenceEvent[],
  summary: string,
  /** The run as its opening would have inserted it, when this closing inserts it (a staged opening). */
  opened?: Omit<NewRun, 'id'>,
) {
  // Closing a stored run sets only its root, counters, summary and time: the other columns stay.
  const run: NewRun = opened
    ? { ...opened, id: derivedRunId(request.id) }
    : {
        id: derivedRunId(request.id),
        org_id: request.org_id,
        buyer_id: request.buyer_id,
        subject_type: 'request',
        job_id: request.id,
        summary,
        jurisdiction: null,
        policy_id: '',
        trust_tier: '',
        work_type: request.type,
      };
  return {
    run,
    batches: batchesOf(request, [receipt], ledger) ?? [],
    summary,
  };
}

/** One receipted completion of {@link completeManyFromReceipts}: as `completeFromReceipt` takes it. */
export interface ReceiptCompletion {
  request: GatewayRequestRow;
  work: Pick<WorkRow, 'id' | 'usage'>;
  node: NodeRow;
  receipt: ReceiptRow;
  /** Its evidence run as this transaction opened it (the request's opening waited for it in the flush). */
  run?: RunHead;
  /**
   * Its opening when this flush has not written it (gateway/flush.ts pairs it with its receipt): the request row is
   * inserted completed, the run inserted whole (and signed when its events are rows).
   */
  opening?: { run: OpeningRun };
}

/**
 * {@link completeFromReceipt} for many requests with a constant number of statements (a flush of
 * the group-commit writer): the charges written by one `chargeReserved` of the ledger (an older
 * request's hold closed by one `closeMany`), the requests closed
 * by one statement, their evidence runs signed by `closeRuns`. The same rows, amounts, events and
 * certificates as `completeFromReceipt` called for each in order. Every request must be locked and
 * running (checked by the caller); throws when one is not, writing nothing more.
 */
export async function completeManyFromReceipts(
  ctx: ServiceContext,
  tx: Queryable,
  done: readonly ReceiptCompletion[],
): Promise<GatewayRequestRow[]> {
  const plans = done.map((d) => {
    const usage = requestUsage(d.request, d.receipt.metering_units, d.work.usage);
    const credit = creditOf(d.request);
    const holdId = d.request.hold_id;
    const micro = holdId || credit ? costMicro(d.request.model, usage) : 0;
    const what = `${describeUsage(usage)} on ${d.node.id}`;
    return { d, usage, holdId, credit: holdId ? undefined : credit, micro, ...chargePostings(d.request, what, d.node) };
  });
  const ledger = ctx.ledger.within(tx);
  // Charged from the reservation their credit was taken from: no hold (DESIGN.md section 7).
  const reserved = plans.filter((p) => p.credit && p.micro > 0);
  const charged = await ledger.chargeReserved(reserved.map((p) => reservedCharging(p.d.request, p.credit, p.micro, p)));
  // Requests opened with a hold (before 2026-11-28) settle or release it.
  const held = plans.filter((p) => p.holdId);
  const closings = held.map(({ holdId, micro, options, earn }): HoldClosing => {
    const id = holdId ?? '';
    if (micro === 0) return { holdId: id, release: true };
    return { holdId: id, usageMicro: micro, options, ...(earn ? { earn } : {}) };
  });
  const closed = closings.length > 0 ? await ledger.closeMany(closings) : [];
  const chargeOf = new Map(reserved.map((p, i) => [p, charged[i]]));
  reserved.forEach((p, i) => {
    const outcome = charged[i];
    if (outcome?.cut) warnCut(ctx, p.d.request, p.micro, outcome);
  });
  const closingOf = new Map(held.map((p, i) => [p, closed[i]]));
  const ends = plans.map((p) => {
    const none = { charged: 0, chargedMicro: 0, events: [] as EvidenceEvent[] };
    const reservedCharge = chargeOf.get(p);
    if (reservedCharge)
      return {
        charged: reservedCharge.charged_cents,
        chargedMicro: reservedCharge.charged_micro,
        events: [ledgerCharged(null, reservedCharge, reservedCharge.earning?.transaction ?? null, 'receipt.verified')],
      };
    const outcome = closingOf.get(p);
    if (!p.holdId || !outcome) return none;
    if ('release' in outcome)
      return {
        charged: 0,
        chargedMicro: 0,
        events: [ledgerReleased(p.holdId, outcome.released_cents, 'receipt.verified')],
      };
    const { settlement, earning } = outcome;
    return {
      charged: settlement.charged_cents,
      chargedMicro: settlement.charged_micro,
      events: [ledgerCharged(p.holdId, settlement, earning?.transaction ?? null, 'receipt.verified')],
    };
  });
  const now = new Date();
  const rows = plans.map(({ d, usage }, i) => ({
    id: d.request.id,
    usage: usage as Record<string, number>,
    charged_cents: ends[i]?.charged ?? 0,
    charged_micro: ends[i]?.chargedMicro ?? 0,
    receipt_id: d.receipt.id,
    completed_at: now,
  }));
  const stored = rows.filter((_, i) => !plans[i]?.d.opening);
  if (stored.length > 0 && (await completeGatewayRequests(tx, stored)) !== stored.length)
    throw new Error('a gateway request of the flush was no longer running');
  const opened = plans.flatMap(({ d }, i) => (d.opening && rows[i] ? [{ ...d.request, ...rows[i] }] : []));
  // Already stored (its ticket rebuilt it meanwhile): the flush fails and each write is retried alone.
  if (opened.length > 0 && (await insertCompletedGatewayRequests(tx, opened)) !== opened.length)
    throw new Error('a gateway request opened by the flush was already stored');
  const runs = plans.map(({ d, usage }, i) => ({
    d,
    subjectId: d.request.id,
    events: [
      ...receiptEvents(d.receipt, d.node, d.work.id),
      ...(ends[i]?.events ?? []),
      {
        type: 'request.completed',
        summary: `completed on ${d.node.id}: ${describeUsage(usage) || 'no usage'}`,
        metadata: { receipt_id: d.receipt.id, usage, charged_cents: ends[i]?.charged ?? 0 },
        causedBy: ['receipt.verified'],
      },
    ],
    summary: `${d.request.type} ${d.request.model}, completed`,
  }));
  // Runs whose events are derived from these records: no event row, no signature (evidence-derived.ts).
  const derived = runs.map(({ d, summary }, i) => {
    const row = rows[i];
    if (!eventsDerived(d.request) || !row) return undefined;
    const closed = { ...d.request, ...row, status: 'completed' as const };
    return {
      opened: d.opening !== undefined,
      closing: derivedClosing(closed, d.receipt, ends[i]?.events ?? [], summary, d.opening?.run.run),
    };
  });
  await closeDerivedRuns(
    tx,
    derived.flatMap((x) => (x && !x.opened ? [x.closing] : [])),
    false,
  );
  await closeDerivedRuns(
    tx,
    derived.flatMap((x) => (x?.opened ? [x.closing] : [])),
    true,
  );
  const closing = runs.filter((r, i) => !r.d.opening && !derived[i]);
  if (closing.length > 0)
    await closeRuns(
      tx,
      ctx.secrets,
      closing.map(({ d, subjectId, events, summary }) => ({
        subjectId,
        events,
        summary,
        ...(d.run ? { head: d.run } : {}),
      })),
    );
  await openAndCloseRuns(
    tx,
    ctx.secrets,
    runs.flatMap(({ d, events, summary }, i) =>
      d.opening && !derived[i]
        ? [{ run: d.opening.run.run, events: d.opening.run.events, closing: events, summary }]
        : [],
    ),
  );
  return plans.map(({ d }, i) => ({
    ...d.request,
    status: 'completed' as const,
    usage: rows[i]?.usage ?? null,
    charged_cents: rows[i]?.charged_cents ?? 0,
    charged_micro: rows[i]?.charged_micro ?? 0,
    receipt_id: d.receipt.id,
    completed_at: now,
  }));
}

/**
 * Ends a running request without a receipt: the client went away (`cancelled`), the node failed
 * (`failed`) or time ran out (`timeout`). Charges `usage` (nothing when absent), crediting
 * `earnTo` when the node did the work it was asked; with `cancelWork` cancels the current work
 * so its node stops (its next heartbeat or events call says so).
 * Returns the cents charged, or undefined when the request had already ended.
 */
export async function endRequest(
  ctx: ServiceContext,
  requestId: string,
  end: {
    status: Exclude<GatewayStatus, 'running' | 'completed'>;
    usage?: ModelUsage;
    error: string;
    earnTo?: Pick<NodeRow, 'id' | 'org_id'>;
    cancelWork?: boolean;
    /** Only while the request is still on this attempt (a sweep's decision, taken before the lock). */
    onWork?: string;
  },
): Promise<number | undefined> {
  // A receipt checked in memory already answered it and completes it behind the answer: the
  // request ends once, completed (decided synchronously, before any await). Its credit goes back
  // once this ending's records (which may charge it) are committed.
  let ended = () => undefined as void;
  if (!ctx.hub.attempts.end(requestId, new Promise<void>((resolve) => (ended = resolve)))) return undefined;
  try {
    // Its opening may still be in the writer: the request is ended once it is in the store.
    await openingsSettled(ctx.hub.attempts, [requestId]);
    return await endInStore(ctx, requestId, end);
  } finally {
    ended();
  }
}

/** {@link endRequest}'s transaction: the request closed, charged what `end` bills, its run closed. */
function endInStore(ctx: ServiceContext, requestId: string, end: Parameters<typeof endRequest>[2]) {
  return ctx.db.transaction(async (tx) => {
    const seen = await findGatewayRequest(tx, requestId);
    if (!seen || seen.status !== 'running') return undefined;
    if (seen.work_id) await workState(tx, seen.work_id, true);
    const locked = await findGatewayRequest(tx, requestId, true);
    if (!locked || locked.status !== 'running') return undefined;
    if (end.onWork !== undefined && locked.work_id !== end.onWork) return undefined;
    // Its end is recorded as rows: the events derived so far become rows first.
    const request = await storeDerivedEvents(tx, locked);
    if (end.cancelWork && request.work_id) await cancelOpenWork(tx, request.work_id, end.error);
    const usage = end.usage ?? {};
    const ended = `request.${end.status}`;
    const { charged, chargedMicro, events } = await charge(
      ctx,
      tx,
      request,
      usage,
      end.earnTo,
      `${describeUsage(usage) || 'nothing'} (${end.status}: ${end.error})`.slice(0, 480),
      ended,
    );
    await closeGatewayRequest(tx, request.id, {
      status: end.status,
      usage: end.usage ? (end.usage as Record<string, number>) : null,
      charged_cents: charged,
      charged_micro: chargedMicro,
      error: end.error,
    });
    await closeRun(
      tx,
      ctx.secrets,
      request.id,
      [
        {
          type: ended,
          summary: `${end.status}: ${end.error}`.slice(0, 500),
          metadata: {
            error: end.error,
            usage: end.usage ?? null,
            node_id: request.node_id,
            work_cancelled: end.cancelWork ?? false,
          },
        },
        ...events,
      ],
      `${request.type} ${request.model}, ${end.status}`,
    );
    return charged;
  });
}

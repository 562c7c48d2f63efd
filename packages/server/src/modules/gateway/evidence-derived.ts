import type { ModelUsage } from '@svc/protocol';
import type { Queryable } from '../../platform/db/index.js';
import { ledgerOfRefAllOrgs, type LedgerRow } from '../billing/store.js';
import {
  ledgerCharged,
  ledgerHeld,
  ledgerReleased,
  policyEvaluated,
  policyId,
  receiptEvents,
  routed,
  type EvidenceNode,
} from '../evidence/events.js';
import { storeDerivedRun, type DerivedBatch, type EvidenceEvent } from '../evidence/recorder.js';
import { receiptsOfJob, type ReceiptRow } from '../receipts/store.js';
import { holdCents } from './pricing.js';
import { findGatewayRequest, setRequestMetadata, type GatewayRequestRow } from './store.js';

/**
 * A gateway request's evidence events as a pure function of its stored records (DESIGN.md section
 * 11, revised 2026-11-27): the request row (with the routing facts its opening keeps in
 * `metadata.evidence`), its receipt and its ledger rows. The writer computes them to commit the
 * run's root; reading the evidence computes them again, so they are never stored as rows.
 */

/** What a request's opening keeps for its evidence (`metadata.evidence`): the routing decision and the policy's bound. */
export interface OpeningFacts {
  max_cost_micro: number;
  chat_fields?: readonly string[];
  routing: {
    node: Pick<EvidenceNode, 'id' | 'country' | 'region' | 'gpu_model'> & { attestation_verified: boolean };
    reason: string;
    candidates: number;
    eligible: number;
    preferred: boolean;
    open_work: number;
  };
  /** Set on a run recorded the old way (SVC_EVIDENCE_GATEWAY_ROWS=1): its events are rows. */
  stored?: true;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** The request's opening facts, or undefined for a request whose events are rows (opened otherwise, or before 2026-11-27). */
export function openingFacts(request: Pick<GatewayRequestRow, 'metadata'>): OpeningFacts | undefined {
  const facts = request.metadata.evidence;
  return isObject(facts) && isObject(facts.routing) ? (facts as unknown as OpeningFacts) : undefined;
}

/** Whether the request's evidence events are derived (not stored as rows). */
export function eventsDerived(request: Pick<GatewayRequestRow, 'metadata'>): boolean {
  const facts = openingFacts(request);
  return facts !== undefined && facts.stored !== true;
}

/**
 * The evidence run id of a request whose events are derived: fixed by the request, so a closing
 * names its run without reading it.
 *
 * @example
 * derivedRunId('chatcmpl-01jd4x8k2m7q9w3e5r6t8y0u2i'); // 'run_chatcmpl-01jd4x8k2m7q9w3e5r6t8y0u2i'
 */
export function derivedRunId(requestId: string): string {
  return `run_${requestId}`;
}

/** The routing constraints of a request: its evidence run's policy snapshot. */
export function requestPolicy(p: {
  model: string;
  jurisdiction: string | null;
  strict_jurisdiction: string | null;
  requires_tee: boolean;
  max_cost_micro: number;
  chat_fields?: readonly string[] | undefined;
}): Record<string, unknown> {
  return {
    model: p.model,
    jurisdiction: p.jurisdiction,
    strict_jurisdiction: p.strict_jurisdiction,
    requires_tee: p.requires_tee,
    max_cost_micro: p.max_cost_micro,
    ...(p.chat_fields ? { chat_fields: p.chat_fields } : {}),
  };
}

/** The policy's note, as `policy.evaluated` summarises it. */
export function policyText(p: Parameters<typeof requestPolicy>[0]): string {
  const parts = [`a live node serving ${p.model}`];
  if (p.strict_jurisdiction) parts.push(`only in ${p.strict_jurisdiction}`);
  if (p.jurisdiction) parts.push(`preferably in ${p.jurisdiction}`);
  if (p.requires_tee) parts.push('attested TEE only');
  if (p.chat_fields) parts.push(`an engine honouring ${p.chat_fields.join(', ')}`);
  parts.push(`at most ${p.max_cost_micro} micro-CAD`);
  return parts.join('; ');
}

/** `routing.decided` and `request.assigned` of an attempt. */
export function routedEvents(routing: OpeningFacts['routing'], workId: string, attempt: number): EvidenceEvent[] {
  const { node, ...decision } = routing;
  return routed(node, decision, { type: 'request.assigned', work_id: workId, attempt });
}

const str = (v: unknown) => (typeof v === 'string' ? v : null);

/** The policy of a request as its row keeps it. */
function policyOf(request: GatewayRequestRow, facts: OpeningFacts) {
  const m = request.metadata;
  return {
    model: request.model,
    jurisdiction: str(m.jurisdiction),
    strict_jurisdiction: str(m.strict_jurisdiction),
    requires_tee: m.requires_tee === true,
    max_cost_micro: facts.max_cost_micro,
    chat_fields: facts.chat_fields,
  };
}

/**
 * The events of a request's opening: received, policy, hold (when the request has one), routing
 * and the first attempt's lease.
 */
export function openingEvents(request: GatewayRequestRow, facts: OpeningFacts): EvidenceEvent[] {
  const p = policyOf(request, facts);
  const policy = requestPolicy(p);
  const attempts = Array.isArray(request.metadata.attempts) ? request.metadata.attempts : [];
  const first: unknown = attempts[0];
  const workId = isObject(first) && typeof first.work_id === 'string' ? first.work_id : (request.work_id ?? '');
  return [
    {
      type: 'request.received',
      summary: `${request.type} request for ${request.model}${request.stream ? ', streamed' : ''}, from ${request.buyer_id}`,
      metadata: {
        request_type: request.type,
        model: request.model,
        stream: request.stream,
        max_cost_micro: facts.max_cost_micro,
      },
    },
    policyEvaluated(policy, policyText(p), policyId(policy)),
    ...(request.hold_id ? [ledgerHeld(request.hold_id, holdCents(facts.max_cost_micro), 'request.received')] : []),
    ...routedEvents(facts.routing, workId, 1),
  ];
}

/** Usage in the order the gateway builds it (pricing.ts `usageFromUnits`), whatever order the store kept. */
function orderedUsage(usage: Record<string, number> | null): ModelUsage {
  const out: Record<string, number> = {};
  for (const k of ['prompt_tokens', 'completion_tokens', 'audio_seconds', 'images'])
    if (typeof usage?.[k] === 'number') out[k] = usage[k];
  return out;
}

/** `12 prompt tokens, 4 completion tokens`: a usage in words. */
export function describeUsage(usage: ModelUsage): string {
  return Object.entries(usage)
    .filter(([, v]) => typeof v === 'number')
    .map(([k, v]) => `${v} ${k.replace(/_/g, ' ')}`)
    .join(', ');
}

/** The node of a gateway receipt as the server recorded it beside the receipt (settle.ts `gatewayReceiptMetadata`). */
function receiptNode(receipt: ReceiptRow): EvidenceNode {
  const m = receipt.metadata;
  return {
    id: receipt.node_id,
    country: str(m.country),
    region: str(m.region),
    gpu_model: str(m.gpu_model),
    attestation_verified: m.attestation_verified === true,
  };
}

/** The closing events of a request completed by its receipt: the receipt, what the ledger did, the completion. */
export function completedEvents(
  request: GatewayRequestRow,
  receipt: ReceiptRow,
  ledger: readonly EvidenceEvent[],
): EvidenceEvent[] {
  const usage = orderedUsage(request.usage);
  const node = receiptNode(receipt);
  return [
    ...receiptEvents(receipt, node, receipt.work_id),
    ...ledger,
    {
      type: 'request.completed',
      summary: `completed on ${node.id}: ${describeUsage(usage) || 'no usage'}`,
      metadata: { receipt_id: receipt.id, usage, charged_cents: request.charged_cents ?? 0 },
      causedBy: ['receipt.verified'],
    },
  ];
}

/**
 * The ledger's event of a completed request, from its ledger rows (`ref` = the request): the
 * charge and the operator's earning; for a request opened with a hold, the release of a hold
 * charged nothing. None when nothing was posted (no cost, or neither hold nor credit).
 */
export function ledgerEventsOf(
  request: Pick<GatewayRequestRow, 'hold_id' | 'org_id'>,
  rows: readonly LedgerRow[],
): EvidenceEvent[] {
  const holdId = request.hold_id;
  const release = rows.find((r) => r.tx_type === 'release');
  const releasedHold = release ? -release.hold_cents : 0;
  const charge = rows.find((r) => !['hold', 'release', 'earning'].includes(r.tx_type) && r.hold_cents === 0);
  if (!charge) return holdId ? [ledgerReleased(holdId, releasedHold, 'receipt.verified')] : [];
  const earning = rows.find((r) => r.tx_type === 'earning') ?? null;
  const settlement = {
    charged_cents: -charge.amount_cents + 0,
    charged_micro: -charge.amount_micro + 0,
    released_cents: holdId ? releasedHold + charge.amount_cents : 0,
    transaction: charge,
  };
  return [ledgerCharged(holdId, settlement, earning, 'receipt.verified')];
}

/**
 * A request's events, in the batches they were committed in (the opening at the request's
 * `created_at`, the completion at its `completed_at`), or undefined when they are rows (the
 * `requestEvents` of evidence's `EvidenceSubjects`, registered in context.ts).
 *
 * @example
 * const batches = await requestEvidenceEvents(ctx.db, requestId); // [{ at, events: [...5] }, { at, events: [...4] }]
 */
export async function requestEvidenceEvents(db: Queryable, requestId: string): Promise<DerivedBatch[] | undefined> {
  const request = await findGatewayRequest(db, requestId);
  if (!request || !eventsDerived(request)) return undefined;
  return batchesOf(
    request,
    await receiptsOfJob(db, request.org_id, request.id),
    await ledgerOfRefAllOrgs(db, request.id),
  );
}

/** {@link requestEvidenceEvents} from records already read (the writer's, as it commits them). */
export function batchesOf(
  request: GatewayRequestRow,
  receipts: readonly ReceiptRow[],
  ledger: readonly LedgerRow[] | readonly EvidenceEvent[],
): DerivedBatch[] | undefined {
  const facts = openingFacts(request);
  if (!facts) return undefined;
  const batches: DerivedBatch[] = [{ at: request.created_at.toISOString(), events: openingEvents(request, facts) }];
  const receipt = receipts.find((r) => r.id === request.receipt_id);
  if (request.status === 'completed' && receipt && request.completed_at) {
    const events = ledger.every((l) => 'type' in l)
      ? (ledger as readonly EvidenceEvent[])
      : ledgerEventsOf(request, ledger as readonly LedgerRow[]);
    batches.push({ at: request.completed_at.toISOString(), events: completedEvents(request, receipt, events) });
  }
  return batches;
}

/**
 * Turns a running request's derived run into a stored one: its events so far written as rows and
 * the request marked so (`stored`), for what is appended to it the usual way (a failover, an end
 * without a receipt). Returns the request as it now stands; one whose events are rows already is
 * returned as it is.
 */
export async function storeDerivedEvents(tx: Queryable, request: GatewayRequestRow): Promise<GatewayRequestRow> {
  const facts = openingFacts(request);
  if (!facts || facts.stored === true) return request;
  await storeDerivedRun(tx, derivedRunId(request.id), request.id, batchesOf(request, [], []) ?? []);
  const metadata = { ...request.metadata, evidence: { ...facts, stored: true } };
  await setRequestMetadata(tx, request.id, metadata);
  return { ...request, metadata };
}

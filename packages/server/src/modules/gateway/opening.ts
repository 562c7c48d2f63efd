import type { ServiceContext } from '../../service-context.js';
import type { Queryable } from '../../platform/db/index.js';
import type { Principal } from '../../platform/principal.js';
import { policyEvaluated, policyId } from '../evidence/events.js';
import { openDerivedRuns, openRunWithHead, openRunsWithHeads } from '../evidence/recorder.js';
import { insertLeasedWork, insertLeasedWorks, type WorkRow } from '../work/store.js';
import {
  batchesOf,
  derivedRunId,
  eventsDerived,
  policyText,
  requestPolicy,
  routedEvents,
  type OpeningFacts,
} from './evidence-derived.js';
import { requestMaxUnits } from './metering.js';
import type { RouteDecision } from './routing.js';
import type { GatewayCall } from './service.js';
import type { RequestCredit } from './settle.js';
import { insertGatewayRequest, insertGatewayRequests, type GatewayRequestRow } from './store.js';
import { issueTicket } from './ticket.js';

/**
 * A gateway request's opening records (DESIGN.md section 10): what `openRequest` decided, as data
 * (`Opening`), and the rows it writes: the request row, what `call.onOpen` adds, the leased work
 * and the request's evidence run. No hold (DESIGN.md section 7, revised 2026-11-27). Written one
 * at a time (`writeOpening`: an opening that commits before dispatch) or many in one flush of the
 * group-commit writer (`writeOpenings`, called by gateway/flush.ts, which also writes an opening
 * whose receipt is in the same flush completed, with that receipt).
 */

/** The evidence run an opening opens (its row and, when its events are rows, those events): `openingParts(...).run`. */
export type OpeningRun = ReturnType<typeof openingParts>['run'];

/** An opening as the flush took it from the store's point of view: the rows it inserted. */
export interface InsertedOpening {
  request: GatewayRequestRow;
  work: WorkRow;
}

/** The routing constraints of a request: its evidence run's policy snapshot. */
export function policyOfCall(call: GatewayCall) {
  return {
    model: call.model,
    jurisdiction: call.route.jurisdiction ?? null,
    strict_jurisdiction: call.route.strict_jurisdiction ?? null,
    requires_tee: call.route.requires_tee ?? false,
    max_cost_micro: call.maxMicro,
    chat_fields: call.route.fields,
  };
}

/** What the request's row keeps of its routing, for its evidence events (evidence-derived.ts). */
export function routingFacts(decision: Extract<RouteDecision, { node: unknown }>): OpeningFacts['routing'] {
  const n = decision.node;
  return {
    node: {
      id: n.id,
      country: n.country,
      region: n.region,
      gpu_model: n.gpu_model,
      attestation_verified: n.attestation_verified,
    },
    reason: decision.reason,
    candidates: decision.candidates,
    eligible: decision.eligible,
    preferred: decision.preferred,
    open_work: n.open_work,
  };
}

export function workPayload(call: GatewayCall) {
  return { id: call.id, type: call.type, model: call.model, payload: call.payload, stream: call.stream };
}

/** What `openRequest` decided, from which its opening records (and their ticket) are written. */
export interface Opening {
  principal: Principal;
  call: GatewayCall;
  workId: string;
  cents: number;
  decision: Extract<RouteDecision, { node: unknown }>;
  /** Handed to a poll waiting in this process (the work row is stored dispatched). */
  dispatched: boolean;
  /** The instance whose credit reservation the maximum cost was taken from (its charge draws on it). */
  instanceId: string;
  leaseExpiresAt: Date;
  /** The request's `created_at`: its opening events are stamped with it. */
  openedAt: Date;
  /** SVC_EVIDENCE_GATEWAY_ROWS: its events are stored as rows (the way before 2026-11-27). */
  eventRows: boolean;
}

/**
 * What the request's row keeps for its evidence events to be derived (evidence-derived.ts): none
 * for a request with events of its own before routing (retrieval), recorded as rows.
 */
function openingFactsOf(o: Opening): { evidence?: OpeningFacts } {
  if ((o.call.evidence ?? []).length > 0) return {};
  const facts: OpeningFacts = {
    max_cost_micro: o.call.maxMicro,
    ...(o.call.route.fields ? { chat_fields: o.call.route.fields } : {}),
    routing: routingFacts(o.decision),
  };
  return { evidence: o.eventRows ? { ...facts, stored: true } : facts };
}

/** `max_units` of the request's metadata: the bound its receipt is checked against (gateway/metering.ts). */
function maxUnitsField(call: GatewayCall): { max_units?: number } {
  const bound = requestMaxUnits(call);
  return bound === undefined ? {} : { max_units: bound };
}

/** The request row as the opening writes it (and as this process knows it before the write). */
export function openedRequest(o: Opening): GatewayRequestRow {
  const { principal, call, workId, decision } = o;
  const node = decision.node;
  const credit: RequestCredit = { instance_id: o.instanceId, cents: o.cents };
  return {
    id: call.id,
    org_id: principal.orgId,
    buyer_id: principal.buyerId,
    type: call.type,
    model: call.model,
    stream: call.stream,
    node_id: node.id,
    work_id: workId,
    hold_id: null,
    metadata: {
      jurisdiction: call.route.jurisdiction ?? null,
      strict_jurisdiction: call.route.strict_jurisdiction ?? null,
      requires_tee: call.route.requires_tee ?? false,
      attempts: [{ node_id: node.id, work_id: workId }],
      credit,
      ...maxUnitsField(call),
      ...(call.audit ? { audit: call.audit } : {}),
      ...openingFactsOf(o),
    },
    status: 'running',
    usage: null,
    charged_cents: null,
    charged_micro: null,
    receipt_id: null,
    error: null,
    created_at: o.openedAt,
    completed_at: null,
  };
}

/** The work row as the opening writes it: what the node is handed before the write. */
export function openedWork(o: Opening): WorkRow {
  return {
    ...workPayload(o.call),
    id: o.workId,
    job_id: o.call.id,
    org_id: o.principal.orgId,
    node_id: o.decision.node.id,
    kind: 0,
    status: 'leased',
    lease_expires_at: o.leaseExpiresAt,
    price_micro_per_unit: 0,
    result_hash: null,
    result_content_type: null,
    metering_units: null,
    usage: null,
  };
}

export function ticketOf(ctx: ServiceContext, o: Opening) {
  const { call } = o;
  return issueTicket(ctx.secrets, {
    org_id: o.principal.orgId,
    buyer_id: o.principal.buyerId,
    request_id: call.id,
    type: call.type,
    model: call.model,
    stream: call.stream,
    max_cost_micro: call.maxMicro,
    jurisdiction: call.route.jurisdiction ?? null,
    strict_jurisdiction: call.route.strict_jurisdiction ?? null,
    requires_tee: call.route.requires_tee ?? false,
    node_id: o.decision.node.id,
    work_id: o.workId,
    issued_at: new Date().toISOString(),
  });
}

/**
 * `openRequest`'s records, in a flush of the writer: the request row, what `call.onOpen` adds, the
 * leased work and the request's evidence run (no hold: the credit is taken in memory). Nothing when the request is already stored: a receipt arriving with the
 * work's ticket rebuilt the opening first (ticket.ts, rebuild.ts).
 */
export async function writeOpening(
  ctx: ServiceContext,
  tx: Queryable,
  o: Opening,
): Promise<InsertedOpening | undefined> {
  const parts = openingParts(ctx, o);
  if (!(await insertGatewayRequest(tx, parts.request))) return undefined;
  await o.call.onOpen?.(tx);
  const work = await insertLeasedWork(tx, parts.work);
  await openRunsOf(tx, [parts]);
  return { request: parts.request, work };
}

/** Opens the evidence runs of openings (the run row alone when its events are derived from its records, DESIGN.md section 11, else with its event rows): one statement for the derived runs, one for the others. */
async function openRunsOf(tx: Queryable, all: readonly ReturnType<typeof openingParts>[]): Promise<void> {
  const derived = all.filter((p) => eventsDerived(p.request));
  await openDerivedRuns(
    tx,
    derived.map((p) => ({
      run: { ...p.run.run, id: derivedRunId(p.request.id) },
      subjectId: p.request.id,
      batches: batchesOf(p.request, [], []) ?? [],
    })),
  );
  const stored = all.filter((p) => !eventsDerived(p.request));
  // Nothing reads the heads back: a receipt of the same flush closes a run by its request id.
  if (stored.length === 1 && stored[0]) await openRunWithHead(tx, stored[0].run.run, stored[0].run.events);
  else
    await openRunsWithHeads(
      tx,
      stored.map((p) => p.run),
    );
}

/** The records an opening writes, as data: `writeOpening` writes one, `openings` many in one flush. */
export function openingParts(ctx: ServiceContext, o: Opening) {
  const { principal, call, workId, decision } = o;
  const asked = policyOfCall(call);
  const policy = requestPolicy(asked);
  const policy_id = policyId(policy);
  return {
    request: openedRequest(o),
    work: {
      ...workPayload(call),
      id: workId,
      owner_id: call.id,
      org_id: principal.orgId,
      node_id: decision.node.id,
      lease_seconds: ctx.config.leaseSeconds,
      dispatched: o.dispatched,
      lease_expires_at: o.leaseExpiresAt,
    },
    run: {
      run: {
        org_id: principal.orgId,
        buyer_id: principal.buyerId,
        subject_type: 'request' as const,
        job_id: call.id,
        summary: `${call.type} ${call.model}, open`,
        jurisdiction: call.route.strict_jurisdiction ?? call.route.jurisdiction ?? null,
        policy_id,
        trust_tier: call.route.requires_tee ? 'sovereign' : 'public',
        work_type: call.type,
      },
      events: [
        {
          type: 'request.received',
          summary: `${call.type} request for ${call.model}${call.stream ? ', streamed' : ''}, from ${principal.buyerId}`,
          metadata: { request_type: call.type, model: call.model, stream: call.stream, max_cost_micro: call.maxMicro },
        },
        ...(call.evidence ?? []),
        policyEvaluated(policy, policyText(asked), policy_id),
        ...routedEvents(routingFacts(decision), workId, 1),
      ],
    },
  };
}

/**
 * The openings of one flush with a constant number of statements: the request rows (those not
 * stored yet: a receipt's ticket may have rebuilt one), what each `call.onOpen` adds, the work rows and the evidence runs, each one multi-row statement, in the
 * same rows as `writeOpening` for each. Throws (having written part) when one of them cannot be
 * written: the flush fails, and the writer writes them one by one.
 */
export async function writeOpenings(
  ctx: ServiceContext,
  tx: Queryable,
  os: readonly Opening[],
): Promise<Map<string, InsertedOpening>> {
  const all = os.map((o) => ({ o, parts: openingParts(ctx, o) }));
  const inserted = await insertGatewayRequests(
    tx,
    all.map((a) => a.parts.request),
  );
  const fresh = all.filter((a) => inserted.has(a.parts.request.id));
  for (const { o } of fresh) await o.call.onOpen?.(tx);
  await insertLeasedWorks(
    tx,
    fresh.map((a) => a.parts.work),
  );
  await openRunsOf(
    tx,
    fresh.map((a) => a.parts),
  );
  // Their receipts may follow in this transaction: the rows as inserted, so that the receipts'
  // batch neither locks nor reads them again.
  return new Map(fresh.map(({ o, parts }) => [parts.request.id, { request: parts.request, work: openedWork(o) }]));
}

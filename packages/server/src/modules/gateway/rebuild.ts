import type { ServiceContext } from '../../service-context.js';
import type { Queryable } from '../../platform/db/index.js';
import { ApiError } from '../../platform/errors.js';
import type { NodeRow } from '../nodes/store.js';
import { policyEvaluated, policyId, routed } from '../evidence/events.js';
import { openRun } from '../evidence/recorder.js';
import { insertLeasedWork } from '../work/store.js';
import { holdCents, type GatewayType } from './pricing.js';

const TYPES: readonly string[] = ['chat', 'embeddings', 'transcription', 'image'] satisfies GatewayType[];
import { findGatewayRequest, insertGatewayRequest } from './store.js';
import type { WorkTicket } from './ticket.js';
import type { RequestCredit } from './settle.js';

/**
 * Rebuilds, in `tx`, the opening of a gateway request whose work reached `node` before its
 * opening committed and whose opening was lost (the instance died before its writer flushed, or
 * the flush failed): the request row, the leased work and the request's evidence run, from the
 * checked ticket (ticket.ts) the node returned with its receipt. No hold and no reservation: its
 * charge, capped at the ticket's maximum cost, is drawn from the unreserved balance and cut to what
 * is there should that be short: the node did the work and the buyer was answered, but the balance
 * never goes below zero (docs/billing.md, "Rebuilt openings"). False, writing nothing,
 * when the request is already stored. The request's payload and, for a grounded chat, its
 * retrieval records are not in the ticket and are not rebuilt.
 */
export async function rebuildOpening(
  ctx: ServiceContext,
  tx: Queryable,
  node: NodeRow,
  ticket: WorkTicket,
): Promise<boolean> {
  if (await findGatewayRequest(tx, ticket.request_id)) return false;
  if (!TYPES.includes(ticket.type)) throw new ApiError('invalid_request', `a work ticket of type ${ticket.type}`);
  const inserted = await insertGatewayRequest(tx, {
    id: ticket.request_id,
    org_id: ticket.org_id,
    buyer_id: ticket.buyer_id,
    type: ticket.type as GatewayType,
    model: ticket.model,
    stream: ticket.stream,
    node_id: node.id,
    work_id: ticket.work_id,
    hold_id: null,
    metadata: {
      jurisdiction: ticket.jurisdiction,
      strict_jurisdiction: ticket.strict_jurisdiction,
      requires_tee: ticket.requires_tee,
      attempts: [{ node_id: node.id, work_id: ticket.work_id }],
      credit: { instance_id: null, cents: holdCents(ticket.max_cost_micro) } satisfies RequestCredit,
      rebuilt_from_ticket: { issued_at: ticket.issued_at },
    },
  });
  // Written by another instance meanwhile: this transaction rolls back.
  if (!inserted)
    throw new ApiError('conflict', `gateway request ${ticket.request_id} was opened meanwhile; send again`);
  await insertLeasedWork(tx, {
    id: ticket.work_id,
    owner_id: ticket.request_id,
    org_id: ticket.org_id,
    node_id: node.id,
    type: ticket.type,
    model: ticket.model,
    payload: {},
    stream: ticket.stream,
    lease_seconds: ctx.config.leaseSeconds,
    dispatched: true,
  });
  const policy = {
    model: ticket.model,
    jurisdiction: ticket.jurisdiction,
    strict_jurisdiction: ticket.strict_jurisdiction,
    requires_tee: ticket.requires_tee,
    max_cost_micro: ticket.max_cost_micro,
  };
  await openRun(
    tx,
    {
      org_id: ticket.org_id,
      buyer_id: ticket.buyer_id,
      subject_type: 'request',
      job_id: ticket.request_id,
      summary: `${ticket.type} ${ticket.model}, open (rebuilt)`,
      jurisdiction: ticket.strict_jurisdiction ?? ticket.jurisdiction,
      policy_id: policyId(policy),
      trust_tier: ticket.requires_tee ? 'sovereign' : 'public',
      work_type: ticket.type,
    },
    [
      {
        type: 'request.received',
        summary: `${ticket.type} request for ${ticket.model}${ticket.stream ? ', streamed' : ''}, from ${ticket.buyer_id} (opening rebuilt from its work ticket)`,
        metadata: {
          request_type: ticket.type,
          model: ticket.model,
          stream: ticket.stream,
          max_cost_micro: ticket.max_cost_micro,
          rebuilt_from_ticket: true,
          ticket_issued_at: ticket.issued_at,
        },
      },
      policyEvaluated(policy, `as the work ticket states it: a node serving ${ticket.model}`),
      ...routed(
        node,
        { reason: 'routed before the opening was stored; rebuilt from the work ticket the node returned' },
        { type: 'request.assigned', work_id: ticket.work_id, attempt: 1 },
      ),
    ],
  );
  ctx.log.warn(
    { request_id: ticket.request_id, work_id: ticket.work_id, node_id: node.id },
    'gateway: the opening of a request was rebuilt from its work ticket',
  );
  return true;
}

import type { Queryable } from '../../platform/db/index.js';
import { findGatewayRequest } from './store.js';

const iso = (d: Date | null) => (d ? d.toISOString() : null);

/**
 * A gateway request as its evidence bundle shows it (the `request` part of evidence's
 * `EvidenceSubjects`, registered in context.ts), or undefined when there is no such request.
 *
 * @example
 * const view = await requestEvidenceSubject(ctx.db, requestId); // { type: 'request', id, model, ... }
 */
export async function requestEvidenceSubject(
  db: Queryable,
  requestId: string,
): Promise<Record<string, unknown> | undefined> {
  const r = await findGatewayRequest(db, requestId);
  if (!r) return undefined;
  return {
    type: 'request',
    id: r.id,
    request_type: r.type,
    model: r.model,
    stream: r.stream,
    status: r.status,
    node_id: r.node_id,
    usage: r.usage,
    charged_cents: r.charged_cents,
    receipt_id: r.receipt_id,
    error: r.error,
    created_at: r.created_at.toISOString(),
    completed_at: iso(r.completed_at),
  };
}

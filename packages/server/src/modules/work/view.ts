import type { WorkItemWire } from '@svc/protocol';
import type { WorkRow } from './store.js';

/** The work item as the node receives it (docs/node-protocol.md). */
export function workItemView(w: WorkRow): WorkItemWire {
  return {
    work_id: w.id,
    job_id: w.job_id,
    type: w.type,
    kind: w.kind,
    model: w.model,
    payload: w.payload,
    stream: w.stream,
    lease_expires_at: w.lease_expires_at.toISOString(),
    ...(w.ticket ? { ticket: w.ticket } : {}),
  };
}

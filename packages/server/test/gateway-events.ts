/**
 * The evidence events of a gateway request served by one node and completed by its receipt, in
 * order (docs/evidence.md): no `ledger.held`, since a gateway request writes no hold (DESIGN.md
 * section 7, revised 2026-11-27).
 */
export const COMPLETED_REQUEST_EVENTS = [
  'request.received',
  'policy.evaluated',
  'routing.decided',
  'request.assigned',
  'receipt.submitted',
  'receipt.verified',
  'ledger.charged',
  'request.completed',
] as const;

/** Work-order statuses and the moves between them (DESIGN.md section 15). Pure. */
export const WORK_ORDER_STATUSES = [
  'queued',
  'running',
  'certified',
  'needs_review',
  'blocked',
  'failed',
  'approved',
  'pr_opened',
  'rejected',
  'rolled_back',
] as const;
export type WorkOrderStatus = (typeof WORK_ORDER_STATUSES)[number];

const NEXT: Readonly<Record<WorkOrderStatus, readonly WorkOrderStatus[]>> = {
  queued: ['running', 'certified', 'needs_review', 'blocked', 'failed'],
  running: ['certified', 'needs_review', 'blocked', 'failed'],
  certified: ['approved', 'rejected'],
  needs_review: ['approved', 'rejected'],
  blocked: [],
  failed: [],
  // Approved but the push or the pull request failed: it stays approved and can be tried again.
  approved: ['pr_opened'],
  pr_opened: ['rolled_back'],
  rejected: [],
  rolled_back: [],
};

/**
 * True when an order may move from `from` to `to`; the service answers 409 otherwise.
 *
 * @example
 * canMove('needs_review', 'approved'); // true
 * canMove('blocked', 'approved'); // false
 */
export function canMove(from: WorkOrderStatus, to: WorkOrderStatus): boolean {
  return NEXT[from].includes(to);
}

/** Statuses in which the order's job may still be running. */
export function isExecuting(status: WorkOrderStatus): boolean {
  return status === 'queued' || status === 'running';
}

/** Job states and the moves between them (DESIGN.md section 8). Pure. */
import type { JOB_STATUSES } from '@svc/protocol/rest';

/** One of the states the API shows (`@svc/protocol/rest`'s JOB_STATUSES, the dashboard's filter). */
export type JobStatus = (typeof JOB_STATUSES)[number];

export const TERMINAL: readonly JobStatus[] = ['completed', 'failed', 'cancelled'];

const NEXT: Record<JobStatus, readonly JobStatus[]> = {
  submitted: ['pending', 'failed', 'cancelled'],
  pending: ['assigned', 'failed', 'cancelled'],
  // A lost lease or a retryable failure puts an assigned or running job back to pending.
  assigned: ['running', 'pending', 'completed', 'failed', 'cancelled'],
  running: ['pending', 'completed', 'failed', 'cancelled'],
  completed: [],
  failed: [],
  cancelled: [],
};

export const MAX_ATTEMPTS = 3;

export function canMove(from: JobStatus, to: JobStatus): boolean {
  return NEXT[from].includes(to);
}

/** The states a job may be in for a move to `to` (used as a guard in UPDATE ... WHERE). */
export function statesBefore(to: JobStatus): JobStatus[] {
  return (Object.keys(NEXT) as JobStatus[]).filter((from) => NEXT[from].includes(to));
}

export function isTerminal(status: JobStatus): boolean {
  return TERMINAL.includes(status);
}

/** After a lost lease or retryable failure: back to pending, or failed once attempts are used up. */
export function afterLostAttempt(attempts: number): 'pending' | 'failed' {
  return attempts >= MAX_ATTEMPTS ? 'failed' : 'pending';
}

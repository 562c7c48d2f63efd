/** Capture-set states and the moves between them (DESIGN.md section 14). Pure. */
export const CAPTURE_STATUSES = ['pending_upload', 'uploading', 'ready', 'processing', 'verified', 'failed'] as const;
export type CaptureStatus = (typeof CAPTURE_STATUSES)[number];

const NEXT: Record<CaptureStatus, readonly CaptureStatus[]> = {
  // The first byte of any file.
  pending_upload: ['uploading', 'failed'],
  // `complete` with every file present, its size and SHA-256 matching the manifest.
  uploading: ['ready', 'failed'],
  // A kind 8 or kind 10 job takes the set.
  ready: ['processing', 'failed'],
  // The job completed and its outputs match (verified), or it failed or was cancelled (ready again).
  processing: ['verified', 'ready', 'failed'],
  verified: [],
  failed: [],
};

export function isTerminal(status: CaptureStatus): boolean {
  return NEXT[status].length === 0;
}

export function canMove(from: CaptureStatus, to: CaptureStatus): boolean {
  return NEXT[from].includes(to);
}

/** The states from which a move to `to` is allowed (a guard for UPDATE ... WHERE status = ANY(...)). */
export function statesBefore(to: CaptureStatus): CaptureStatus[] {
  return CAPTURE_STATUSES.filter((from) => NEXT[from].includes(to));
}

/** Why a move is refused, naming both states, or undefined when it is allowed. */
export function refusal(from: CaptureStatus, to: CaptureStatus): string | undefined {
  if (canMove(from, to)) return undefined;
  if (isTerminal(from)) return `the capture set is ${from}, a final state: it cannot move to ${to}`;
  return `a capture set cannot move from ${from} to ${to} (from ${from} it can move to ${NEXT[from].join(' or ')})`;
}

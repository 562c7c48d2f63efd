import { describe, expect, it } from 'vitest';
import { CAPTURE_STATUSES, canMove, isTerminal, refusal, statesBefore, type CaptureStatus } from './states.js';

// Every pair of states, and whether DESIGN.md section 14 allows the move.
const ALLOWED: readonly [CaptureStatus, CaptureStatus][] = [
  ['pending_upload', 'uploading'],
  ['uploading', 'ready'],
  ['ready', 'processing'],
  ['processing', 'verified'],
  ['processing', 'ready'],
  ['pending_upload', 'failed'],
  ['uploading', 'failed'],
  ['ready', 'failed'],
  ['processing', 'failed'],
];

describe('capture-set states', () => {
  it.each(CAPTURE_STATUSES.flatMap((from) => CAPTURE_STATUSES.map((to) => [from, to] as const)))(
    '%s -> %s follows the table',
    (from, to) => {
      const allowed = ALLOWED.some(([a, b]) => a === from && b === to);
      expect(canMove(from, to)).toBe(allowed);
      const why = refusal(from, to);
      if (allowed) expect(why).toBeUndefined();
      else expect(why).toMatch(new RegExp(`${from}.*${to}`));
    },
  );

  it('has verified and failed as the only final states', () => {
    expect(CAPTURE_STATUSES.filter(isTerminal)).toEqual(['verified', 'failed']);
    expect(refusal('verified', 'processing')).toBe(
      'the capture set is verified, a final state: it cannot move to processing',
    );
  });

  it('lists the states a move may start from', () => {
    expect(statesBefore('failed')).toEqual(['pending_upload', 'uploading', 'ready', 'processing']);
    expect(statesBefore('ready')).toEqual(['uploading', 'processing']);
    expect(statesBefore('uploading')).toEqual(['pending_upload']);
    expect(statesBefore('pending_upload')).toEqual([]);
  });

  it('names the allowed next states in a refusal', () => {
    expect(refusal('uploading', 'verified')).toBe(
      'a capture set cannot move from uploading to verified (from uploading it can move to ready or failed)',
    );
  });
});

import type { Queryable } from '../../platform/db/index.js';
import type { EvidenceEvent, RunHead } from '../evidence/recorder.js';
import type { NewRun } from '../evidence/store.js';
import type { WorkRow } from '../work/store.js';
import type { GatewayRequestRow } from './store.js';

/**
 * What a flush's transaction has just inserted for a request's opening: the request row, its
 * leased work and the head of its evidence run. A receipt of the same request applied later in
 * that same transaction (its opening waited for it in the writer) reads them from here instead of
 * locking and reading them again: rows inserted by a transaction that has not committed cannot
 * have changed meanwhile. Taken once, so a second use reads the store.
 */
export interface FreshOpening {
  request: GatewayRequestRow;
  work: WorkRow;
  run: RunHead;
}

/**
 * An opening a flush has not written at all, because its request's receipt is in the same flush
 * (announced by {@link expectReceipts}): the receipt's batch writes the request, its work and its
 * evidence run once, already completed (gateway/settle.ts `completeManyFromReceipts`).
 */
export interface StagedOpening {
  request: GatewayRequestRow;
  work: WorkRow & { lease_seconds: number; dispatched: boolean };
  run: { run: Omit<NewRun, 'id'>; events: readonly EvidenceEvent[] };
}

interface InTx {
  written: Map<string, FreshOpening>;
  staged: Map<string, StagedOpening>;
  /** Request id -> the node whose receipt for it is in this flush. */
  receipts: Map<string, string>;
}

const fresh = new WeakMap<Queryable, InTx>();

function inTx(tx: Queryable): InTx {
  let state = fresh.get(tx);
  if (!state) {
    state = { written: new Map(), staged: new Map(), receipts: new Map() };
    fresh.set(tx, state);
  }
  return state;
}

/** Records the opening of `opening.request` as inserted inside `tx`. */
export function rememberOpening(tx: Queryable, opening: FreshOpening): void {
  inTx(tx).written.set(opening.request.id, opening);
}

/** The flush `tx` holds a receipt of each of these requests, from these nodes (first receipt of each). */
export function expectReceipts(tx: Queryable, receipts: readonly { requestId: string; nodeId: string }[]): void {
  const expected = inTx(tx).receipts;
  for (const r of receipts) if (!expected.has(r.requestId)) expected.set(r.requestId, r.nodeId);
}

/** Whether the flush `tx` holds a receipt of `requestId` from `nodeId`. */
export function receiptExpected(tx: Queryable, requestId: string, nodeId: string): boolean {
  return fresh.get(tx)?.receipts.get(requestId) === nodeId;
}

/** Keeps an opening unwritten, for its receipt's batch in the same flush to write whole. */
export function stageOpening(tx: Queryable, opening: StagedOpening): void {
  inTx(tx).staged.set(opening.request.id, opening);
}

/** The opening of `requestId` inserted (`written`) or staged inside `tx`, once (undefined when neither, or taken). */
export function takeOpening(
  tx: Queryable,
  requestId: string,
): ({ written: true } & FreshOpening) | ({ written: false } & StagedOpening) | undefined {
  const state = fresh.get(tx);
  const written = state?.written.get(requestId);
  if (written) {
    state?.written.delete(requestId);
    return { written: true, ...written };
  }
  const staged = state?.staged.get(requestId);
  if (staged) {
    state?.staged.delete(requestId);
    return { written: false, ...staged };
  }
  return undefined;
}

/** How many staged openings of `tx` no receipt has taken (each must be: else the flush fails and is retried item by item). */
export function stagedLeft(tx: Queryable): number {
  return fresh.get(tx)?.staged.size ?? 0;
}

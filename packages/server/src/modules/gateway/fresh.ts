import type { Queryable } from '../../platform/db/index.js';
import type { RunHead } from '../evidence/recorder.js';
import type { WorkRow } from '../work/store.js';
import type { GatewayRequestRow } from './store.js';

/**
 * What a flush's transaction has just inserted for a request's opening: the request row, its
 * leased work and the head of its evidence run. A receipt of the same request applied alone later
 * in that same transaction (one request at a time: its opening waited for it in the writer) reads
 * them from here instead of locking and reading them again: rows inserted by a transaction that
 * has not committed cannot have changed meanwhile. Taken once, so a second use reads the store.
 */
export interface FreshOpening {
  request: GatewayRequestRow;
  work: WorkRow;
  run: RunHead;
}

const fresh = new WeakMap<Queryable, Map<string, FreshOpening>>();

/** Records the opening of `opening.request` as inserted inside `tx`. */
export function rememberOpening(tx: Queryable, opening: FreshOpening): void {
  const inTx = fresh.get(tx) ?? new Map<string, FreshOpening>();
  fresh.set(tx, inTx);
  inTx.set(opening.request.id, opening);
}

/** The opening of `requestId` inserted inside `tx`, once (undefined when it was not, or was taken). */
export function takeOpening(tx: Queryable, requestId: string): FreshOpening | undefined {
  const inTx = fresh.get(tx);
  const opening = inTx?.get(requestId);
  inTx?.delete(requestId);
  return opening;
}

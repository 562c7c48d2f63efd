import type { CreditTicket } from '../billing/reservations.js';
import type { GatewayRequestRow } from './store.js';

/** What a request opened in this process brings with it (`RunningAttempts.open`). */
export interface OpenedHere {
  /** Its opening records, queued in the writer: the work may reach the node before they commit. */
  opening?: Promise<unknown>;
  /** Brings the opening's flush forward (it may wait for the request's completion to share it). */
  hurry?: () => void;
  /**
   * Its maximum cost, taken from this instance's credit reservation (no hold row: DESIGN.md
   * section 7, revised 2026-11-27): released when the request is forgotten here, that is once its
   * charge committed (the write of a receipt claimed in memory settled) or it ended otherwise, so
   * the cents are counted as taken until the reservation row has lost what the charge drew.
   */
  credit?: CreditTicket;
}

/**
 * The gateway requests this process runs, with their current attempt: what a receipt needs to be
 * checked in memory and answered before its records commit (DESIGN.md section 4, revised
 * 2026-11-24). Each request moves `open` -> `completing` (a receipt claimed it; its records are
 * in the writer) or `open` -> gone (it ended otherwise). The two claims are synchronous, so a
 * receipt and a client disconnect or timeout racing for one request cannot both win: the request
 * ends exactly once.
 */
export interface RunningAttempts {
  /** Records a request leased as `row.work_id` to `row.node_id`, with what it brings ({@link OpenedHere}). */
  open(row: GatewayRequestRow, here?: OpenedHere): void;
  /**
   * The opening write of a request (by its id) or of its first work (by work id) while it has
   * not settled: whoever must find the request or its work in the store waits for it first (and
   * asking for it hurries its flush).
   */
  opening(id: string): Promise<unknown> | undefined;
  /** A failover leased the request again: receipts for the old work now take the store's path. */
  moved(requestId: string, workId: string, nodeId: string): void;
  /**
   * Claims the request for a receipt of `nodeId` on its current work: the attempt, now
   * `completing`, or undefined when this process cannot decide (not running here, another node or
   * work, already claimed or ended, or refused by `accepts`: the request stays open).
   */
  claim(requestId: string, nodeId: string, accepts?: (row: GatewayRequestRow) => boolean): RunningAttempt | undefined;
  /** Ties the claimed request to the write of its records; forgotten once it settles. */
  writing(requestId: string, written: Promise<unknown>): void;
  /** The pending write of a claimed request, for a receipt that arrives again meanwhile. */
  pendingWrite(requestId: string): Promise<unknown> | undefined;
  /**
   * The request whose current attempt is `workId`, while it is open here (not claimed by a
   * receipt, not ended): what a node's stream events need checked before they are forwarded.
   */
  runningWork(workId: string): RunningAttempt | undefined;
  /**
   * Claims the request for an ending without a receipt: false when a receipt already completes it
   * behind the answer (then the caller must not end it), true otherwise (it is forgotten here).
   * Its credit goes back once `written` settles (the ending's records, which may charge it), else at once.
   */
  end(requestId: string, written?: Promise<unknown>): boolean;
  readonly size: number;
  /** How many of these requests each node holds now (the directory's open work of this instance). */
  readonly openPerNode: ReadonlyMap<string, number>;
  /** The work ids of these requests' current attempts (what the store's count of open work leaves out). */
  openWorkIds(): string[];
}

export interface RunningAttempt {
  row: GatewayRequestRow;
  state: 'open' | 'completing';
  written?: Promise<unknown>;
  credit?: CreditTicket;
}

/**
 * Waits until none of `ids` (request or work ids) has an opening in flight: settled, whether it
 * committed or failed (then the caller finds nothing in the store, as for unknown work).
 */
export async function openingsSettled(
  attempts: Pick<RunningAttempts, 'opening'>,
  ids: readonly string[],
): Promise<void> {
  const pending = ids.map((id) => attempts.opening(id)).filter((p): p is Promise<unknown> => p !== undefined);
  if (pending.length > 0) await Promise.all(pending.map((p) => p.catch(() => undefined)));
}

/**
 * @example
 * const attempts = createRunningAttempts();
 * attempts.open(row);
 * const claimed = attempts.claim(row.id, row.node_id); // now completing
 */
export function createRunningAttempts(): RunningAttempts {
  const running = new Map<string, RunningAttempt>();
  const openings = new Map<string, { opening: Promise<unknown>; hurry: (() => void) | undefined }>();
  const perNode = new Map<string, number>();
  // Request id by the work id of its current attempt.
  const byWork = new Map<string, string>();
  const track = (row: GatewayRequestRow) => {
    if (row.work_id) byWork.set(row.work_id, row.id);
  };
  const untrack = (row: GatewayRequestRow) => {
    if (row.work_id && byWork.get(row.work_id) === row.id) byWork.delete(row.work_id);
  };
  const count = (nodeId: string | null, by: number) => {
    if (nodeId === null) return;
    const n = (perNode.get(nodeId) ?? 0) + by;
    if (n > 0) perNode.set(nodeId, n);
    else perNode.delete(nodeId);
  };
  const forgetRequest = (requestId: string, entry: RunningAttempt | undefined, written?: Promise<unknown>) => {
    if (!entry || running.get(requestId) !== entry) return;
    running.delete(requestId);
    count(entry.row.node_id, -1);
    untrack(entry.row);
    const credit = entry.credit;
    if (!credit) return;
    // Not before the charge that draws on the reservation has committed (or failed).
    if (written) written.then(credit.release, credit.release);
    else credit.release();
  };
  return {
    open(row, here = {}) {
      const { opening, hurry, credit } = here;
      forgetRequest(row.id, running.get(row.id));
      running.set(row.id, { row, state: 'open', ...(credit ? { credit } : {}) });
      count(row.node_id, 1);
      track(row);
      if (!opening) return;
      const ids = [row.id, ...(row.work_id ? [row.work_id] : [])];
      const entry = { opening, hurry };
      for (const id of ids) openings.set(id, entry);
      const forget = () => {
        for (const id of ids) if (openings.get(id) === entry) openings.delete(id);
      };
      opening.then(forget, forget);
    },
    opening(id) {
      const entry = openings.get(id);
      entry?.hurry?.();
      return entry?.opening;
    },
    moved(requestId, workId, nodeId) {
      const entry = running.get(requestId);
      if (entry?.state !== 'open') return;
      count(entry.row.node_id, -1);
      untrack(entry.row);
      entry.row = { ...entry.row, work_id: workId, node_id: nodeId };
      count(nodeId, 1);
      track(entry.row);
    },
    claim(requestId, nodeId, accepts) {
      const entry = running.get(requestId);
      if (!entry || entry.state !== 'open' || entry.row.node_id !== nodeId) return undefined;
      if (accepts && !accepts(entry.row)) return undefined;
      entry.state = 'completing';
      return entry;
    },
    writing(requestId, written) {
      const entry = running.get(requestId);
      if (!entry) return;
      entry.written = written;
      const forget = () => forgetRequest(requestId, entry);
      written.then(forget, forget);
    },
    pendingWrite(requestId) {
      return running.get(requestId)?.written;
    },
    runningWork(workId) {
      const requestId = byWork.get(workId);
      const entry = requestId === undefined ? undefined : running.get(requestId);
      return entry?.state === 'open' && entry.row.work_id === workId ? entry : undefined;
    },
    end(requestId, written) {
      const entry = running.get(requestId);
      if (entry?.state === 'completing') return false;
      forgetRequest(requestId, entry, written);
      return true;
    },
    get size() {
      return running.size;
    },
    get openPerNode() {
      return perNode;
    },
    openWorkIds() {
      return [...byWork.keys()];
    },
  };
}

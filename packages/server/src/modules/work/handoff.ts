import type { WorkRow } from './store.js';

/**
 * A node's poll waiting in this process, taken out of the waiters to be handed work in memory.
 * Defined here, below the scheduler (which keeps the waiters) and the owners of direct work (which
 * hand their leased work over), so neither imports the other for it.
 */
export interface Handoff {
  /** Hands the work to the poll; false, handing nothing, when the poll ended meanwhile (its node hung up). */
  deliver(work: WorkRow[]): boolean;
  /** Gives the poll back: it looks in the store and waits on as before. */
  release(): void;
}

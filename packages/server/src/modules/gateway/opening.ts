/**
 * Cents this process has promised to gateway requests that passed the balance check and whose
 * opening transaction (the hold among it) has not committed yet. The balance read cannot see
 * those holds; subtracting these keeps a second request of the same organization from being
 * dispatched on credits the first is about to hold. On the embedded store the work reaches the
 * node before that commit (see `openRequest`), so this is what keeps the 402 before dispatch
 * there; elsewhere the hold's row lock does, and this only spares the second a transaction. A
 * deliberate in-memory cache: it only ever speaks of this process's own requests.
 */
export interface OpeningHolds {
  /** The cents held by this process's opening requests of `orgId`. */
  of(orgId: string): number;
  /** Adds `cents` for `orgId`; the returned function takes them off again (once, however often it is called). */
  add(orgId: string, cents: number): () => void;
}

/**
 * @example
 * const opening = createOpeningHolds();
 * const done = opening.add('org_1', 5);
 * opening.of('org_1'); // 5
 * done();
 */
export function createOpeningHolds(): OpeningHolds {
  const held = new Map<string, number>();
  return {
    of: (orgId) => held.get(orgId) ?? 0,
    add(orgId, cents) {
      held.set(orgId, (held.get(orgId) ?? 0) + cents);
      let open = true;
      return () => {
        if (!open) return;
        open = false;
        const left = (held.get(orgId) ?? 0) - cents;
        if (left > 0) held.set(orgId, left);
        else held.delete(orgId);
      };
    },
  };
}

import { eventHashInput, type EvidenceEventInput } from './evidence.js';
import { canonicalJson } from './jcs.js';
import { leafHash } from './merkle.js';

/**
 * `event_hash` = hex SHA-256(0x00 || UTF-8 JCS(event)), an RFC 6962 leaf hash, so the run's
 * `root_hash` is `merkleRoot` over the event hashes in `sequence` order.
 *
 * @example
 * eventHash({ ...apiEvent, parents: parentsOf(apiEvent.id, events, edges) });
 */
export function eventHash(event: EvidenceEventInput): string {
  return leafHash(canonicalJson(eventHashInput(event)));
}

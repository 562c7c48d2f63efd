import { channel } from 'node:diagnostics_channel';

/** The diagnostics channel `hop` publishes on; `bench/hops.ts` listens to it. */
export const HOP_CHANNEL = 'svc:hop';

/**
 * The points of a gateway request's way that `hop` marks, in the order one passes them:
 * - `gateway.handler`: the route's handler starts (HTTP parsed, authenticated, validated);
 * - `gateway.pushed`: the work is written to the node's channel (routed, credit held, ticket made);
 * - `node.work`: the node agent received a channel message (the work);
 * - `node.sent`: the agent wrote a channel message (the receipt with its result, then the grant);
 * - `work.received`: the server received a channel message from a node (modules/work);
 * - `work.receipt`: the server starts on a receipt (the message parsed and checked);
 * - `gateway.answer`: the request's answer is ready (the receipt verified, completed in memory).
 */
export type HopLabel =
  | 'gateway.handler'
  | 'gateway.pushed'
  | 'node.work'
  | 'node.sent'
  | 'work.received'
  | 'work.receipt'
  | 'gateway.answer';

const hops = channel(HOP_CHANNEL);

/**
 * Marks that a request reached `label`, for the per-hop breakdown of `bench/hops.ts`: publishes
 * the label on the diagnostics channel `svc:hop` (node:diagnostics_channel, which APM tools read
 * too). One property read when nobody listens.
 *
 * @example
 * hop('gateway.handler');
 */
export function hop(label: HopLabel): void {
  if (hops.hasSubscribers) hops.publish(label);
}

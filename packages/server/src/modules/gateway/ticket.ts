import { createHmac, timingSafeEqual } from 'node:crypto';
import { canonicalJson, type WorkTicketWire } from '@svc/protocol';
import type { PlatformSecrets } from '../../platform/secrets.js';
import { ApiError } from '../../platform/errors.js';

/** A work ticket: the opening facts of a gateway request, and their HMAC. */
export type WorkTicket = WorkTicketWire;

/**
 * The longest a ticket rebuilds an opening after it was issued: a node holds a receipt in its
 * outbox at most this long (it re-sends on reconnect), and the instance that dispatched the work
 * flushes its opening within milliseconds. Past it, a receipt for unknown work is refused as
 * before (the request, never committed, was never charged).
 */
export const TICKET_MAX_AGE_MS = 60 * 60_000;

/** A ticket issued further ahead than this (clock skew between instances) is refused. */
const TICKET_MAX_SKEW_MS = 60_000;

/**
 * The ticket key: derived from the platform's session secret (kept in the store, the same on
 * every instance), under a label of its own so that no other use of that secret signs a ticket.
 */
function ticketKey(secrets: Pick<PlatformSecrets, 'sessionSecret'>): Buffer {
  const secret = secrets.sessionSecret;
  const known = ticketKeys.get(secret);
  // The copy guards against a secret changed in place: it is derived again, never used stale.
  if (known && known.secret.equals(secret)) return known.key;
  const key = createHmac('sha256', secret).update('svc-work-tickets-v1').digest();
  ticketKeys.set(secret, { secret: Buffer.from(secret), key });
  return key;
}

/**
 * The ticket key of each session secret, derived once (every request issues a ticket): keyed by
 * the secret's Buffer, so a secret loaded or rotated anew is derived anew, and a dropped one is
 * forgotten with it.
 */
const ticketKeys = new WeakMap<Buffer, { secret: Buffer; key: Buffer }>();

function macOf(secrets: Pick<PlatformSecrets, 'sessionSecret'>, fields: Omit<WorkTicket, 'mac'>): Buffer {
  return createHmac('sha256', ticketKey(secrets)).update(canonicalJson(fields), 'utf8').digest();
}

/**
 * Signs a ticket over `fields` (JCS, RFC 8785).
 *
 * @example
 * const ticket = issueTicket(ctx.secrets, { org_id, buyer_id, request_id, ..., issued_at: new Date().toISOString() });
 */
export function issueTicket(
  secrets: Pick<PlatformSecrets, 'sessionSecret'>,
  fields: Omit<WorkTicket, 'mac'>,
): WorkTicket {
  return { ...fields, mac: macOf(secrets, fields).toString('hex') };
}

/**
 * Checks a ticket returned with a receipt, strictly: its MAC (constant-time), that it names the
 * node sending it and the work and request the receipt is for, and that it was issued at most
 * {@link TICKET_MAX_AGE_MS} ago. Throws 403 `forbidden` (saying why) otherwise.
 */
export function checkTicket(
  secrets: Pick<PlatformSecrets, 'sessionSecret'>,
  ticket: WorkTicket,
  expect: { nodeId: string; requestId: string; workId?: string },
  now = Date.now(),
): WorkTicket {
  const { mac, ...fields } = ticket;
  const want = macOf(secrets, fields);
  const got = Buffer.from(mac, 'hex');
  if (got.length !== want.length || !timingSafeEqual(got, want))
    throw new ApiError('forbidden', 'the work ticket does not verify');
  if (ticket.node_id !== expect.nodeId) throw new ApiError('forbidden', 'the work ticket names another node');
  if (ticket.request_id !== expect.requestId || (expect.workId !== undefined && ticket.work_id !== expect.workId))
    throw new ApiError('forbidden', 'the work ticket names other work');
  const issued = Date.parse(ticket.issued_at);
  if (!Number.isFinite(issued) || issued > now + TICKET_MAX_SKEW_MS)
    throw new ApiError('forbidden', 'the work ticket has no usable issued_at');
  if (now - issued > TICKET_MAX_AGE_MS) throw new ApiError('forbidden', 'the work ticket has expired');
  return ticket;
}

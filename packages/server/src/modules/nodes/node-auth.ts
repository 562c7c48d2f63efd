import { NODE_HEADERS, NODE_MAX_CLOCK_SKEW_MS, ProtocolError, requestMessage, verifyHex } from '@svc/protocol';
import type { FastifyRequest } from 'fastify';
import type { ServiceContext } from '../../service-context.js';
import { ApiError } from '../../platform/errors.js';
import { findNode, rememberSignature, rememberSignatureAndRead, touchNode, type NodeRow } from './store.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The node behind a signed node request (set by verifyNodeRequest). */
    node?: NodeRow;
    /** The exact request body bytes, kept for signature checks. */
    rawBody?: Buffer;
  }
}

function header(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name.toLowerCase()];
  return typeof value === 'string' ? value : undefined;
}

/**
 * A deliberate cache: when this process last wrote a node's `last_seen` on a signed call, so
 * that a busy node costs one write a second, not one per request (liveness is judged over 30 s).
 * Heartbeats still write every time, with their load. Bounded; cleared when full.
 */
const lastTouched = new Map<string, number>();

function shouldTouch(nodeId: string): boolean {
  const now = Date.now();
  if ((lastTouched.get(nodeId) ?? 0) > now - 1000) return false;
  if (lastTouched.size >= 100_000) lastTouched.clear();
  lastTouched.set(nodeId, now);
  return true;
}

/**
 * The next signed call of the node is recorded whatever the throttle says: a node that hung up
 * its long-poll is taken for gone unless the store records a call after the hang-up
 * (work/node-loss.ts, `pollLost`).
 */
export function forgetTouch(nodeId: string): void {
  lastTouched.delete(nodeId);
}

const refuse = (why: string) => new ApiError('unauthorized', `node request refused: ${why}`);

/**
 * A hint, not a trust decision: each node's public key as this process last read it (a node's
 * key never changes: registration is keyed by it). With it the signature is checked before the
 * store is asked anything, and the nonce and the node's current row then come in one statement,
 * whose key must still be the one that verified. Bounded; cleared when full.
 */
const knownKeys = new Map<string, string>();

function rememberKey(nodeId: string, pubkey: string): void {
  if (knownKeys.size >= 100_000) knownKeys.clear();
  knownKeys.set(nodeId, pubkey);
}

/**
 * Verifies a signed node request (docs/node-protocol.md): known node, timestamp within 60 s,
 * Ed25519 signature over method, path with query, timestamp and body hash, and never seen before.
 */
export async function verifyNodeRequest(ctx: ServiceContext, request: FastifyRequest): Promise<NodeRow> {
  const nodeId = header(request, NODE_HEADERS.node);
  const timestamp = header(request, NODE_HEADERS.timestamp);
  const signature = header(request, NODE_HEADERS.signature);
  if (!nodeId || !timestamp || !signature)
    throw refuse(`send ${NODE_HEADERS.node}, ${NODE_HEADERS.timestamp} and ${NODE_HEADERS.signature}`);
  // Canonical digits only: the signed string carries the header as sent, and the protocol's
  // signing string refuses a leading zero.
  if (!/^(?:0|[1-9]\d{0,15})$/.test(timestamp))
    throw refuse('timestamp must be unix milliseconds in canonical decimal digits (no sign, no leading zero)');
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(nodeId)) throw refuse('unknown node');
  if (Math.abs(Date.now() - Number(timestamp)) > NODE_MAX_CLOCK_SKEW_MS)
    throw refuse('timestamp is more than 60 s from the server clock');
  if (!/^[0-9a-f]{128}$/.test(signature)) throw refuse('signature must be 128 lowercase hex characters');
  let message: Buffer;
  try {
    message = requestMessage({
      method: request.method,
      pathWithQuery: request.url,
      timestamp,
      body: request.rawBody ?? Buffer.alloc(0),
    });
  } catch (err) {
    if (err instanceof ProtocolError) throw refuse(err.message); // a path no node could have signed
    throw err;
  }
  const known = knownKeys.get(nodeId);
  let node: NodeRow | undefined;
  if (known !== undefined && verifyHex(message, signature, known)) {
    const read = await rememberSignatureAndRead(ctx.db, nodeId, signature);
    if (!read.node || read.node.pubkey !== known) {
      knownKeys.delete(nodeId);
      throw refuse(read.node ? 'bad signature' : 'unknown node');
    }
    if (!read.fresh) throw refuse('replayed request');
    node = read.node;
  } else {
    // First call this process sees from the node (or a signature its known key refuses): the row first.
    node = await findNode(ctx.db, nodeId);
    if (!node) throw refuse('unknown node');
    if (!verifyHex(message, signature, node.pubkey)) throw refuse('bad signature');
    if (!(await rememberSignature(ctx.db, signature))) throw refuse('replayed request');
    rememberKey(node.id, node.pubkey);
  }
  ctx.nodeDirectory.seen(node.id);
  if (shouldTouch(node.id)) await touchNode(ctx.db, node.id);
  return node;
}

export function nodeOf(request: FastifyRequest): NodeRow {
  if (!request.node) throw refuse('not a node request');
  return request.node;
}

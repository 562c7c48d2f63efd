import {
  hop,
  NODE_CHANNEL_MAX_GRANTED,
  NodeChannelMessageSchema,
  tickCork,
  type NodeChannelMessage,
  type ServerChannelMessage,
  type Unsequenced,
} from '@svc/protocol';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import type { Socket } from 'node:net';
import type { ServiceContext } from '../../service-context.js';
import { ApiError } from '../../platform/errors.js';
import { forwardEvents } from './node-events.js';
import { undispatchWork } from './store.js';
import type { NodeRow } from '../nodes/store.js';
import { deliverResult, failWork, submitReceipt } from './intake.js';
import { receiptOfWork } from '../receipts/store.js';
import { heartbeat, pollWork } from './node-work.js';
import { workItemView } from './view.js';
import { createStandingSlots, giveBackWork } from './standing.js';

const checkMessage = TypeCompiler.Compile(NodeChannelMessageSchema);

/** The part of a WebSocket a connection uses (the `ws` library's socket fits). */
export interface ChannelSocket {
  /** `done` learns whether the data reached the socket (an error: it did not). */
  send(data: string, done?: (err?: Error) => void): void;
  close(code?: number, reason?: string): void;
  readonly readyState: number;
}

/** What the server does with one node's channel: feed it messages, close it when the socket closes. */
export interface ChannelConnection {
  receive(text: string): void;
  close(): void;
}

const OPEN = 1;

/** Close codes: 1008 policy violation (bad message or sequence), 1011 internal error. */
const POLICY = 1008;

function errorBody(err: unknown): { code: number; error: string; message: string } {
  if (err instanceof ApiError) return { code: err.status, error: err.code, message: err.message };
  return { code: 500, error: 'internal', message: 'internal server error' };
}

/**
 * One node's channel (docs/node-protocol.md, "The node channel"), over an authenticated socket:
 * the node's messages run the same services as the HTTP routes, work is pushed as soon as a
 * pull's wait ends with work, or at once on the slots the node granted (./standing.ts), and
 * receipts are acknowledged once committed. A receipt for work
 * whose receipt (the same signature) is already stored is acknowledged again: applied at most
 * once, keyed by work id. A message that is not JSON, does not fit its schema or whose `seq` does
 * not increase closes the channel (1008).
 *
 * @example
 * const conn = openChannel(ctx, node, socket);
 * socket.on('message', (data) => conn.receive(data.toString()));
 * socket.on('close', () => conn.close());
 */
export function openChannel(ctx: ServiceContext, node: NodeRow, socket: ChannelSocket): ChannelConnection {
  let sent = 0;
  let lastSeq = 0;
  let closed = false;
  const stop = new AbortController();
  let pulling = false;
  // Ends the pull's current wait so that it looks again: after a receipt or a failure the node has
  // a free slot, and a job may be claimable that no message will announce.
  let nudge: AbortController | undefined;
  // Frames sent in one tick leave in one write: the TCP socket under the WebSocket (the `ws`
  // library's `_socket`, the batching its maintainers advise) is corked from the first send of a
  // tick to the next tick, so the acks of one writer flush reach the node together. Frames and
  // order are unchanged; a write that fails still calls back with its error.
  const cork = tickCork();
  const write = (text: string, done?: (err?: Error) => void) => {
    cork((socket as { _socket?: Socket })._socket);
    socket.send(text, done);
  };
  const send = (message: Unsequenced<ServerChannelMessage>) => {
    if (closed || socket.readyState !== OPEN) return;
    write(JSON.stringify({ ...message, seq: ++sent }));
  };
  const slots = createStandingSlots(ctx, node, (rows, re) => {
    if (closed || socket.readyState !== OPEN) return false;
    write(JSON.stringify({ type: 'work', re, work: rows.map(workItemView), seq: ++sent }), (err) => {
      if (!err) return;
      // Never reached the socket, which is broken: this channel stands no more; the work goes back to the store.
      close();
      void giveBackWork(ctx, node.id, rows).catch((e: unknown) =>
        ctx.log.error({ err: e, node_id: node.id }, 'give-back failed'),
      );
    });
    return true;
  });
  const repoll = () => {
    nudge?.abort();
    slots.look();
  };
  const refuse = (why: string) => {
    ctx.log.warn({ node_id: node.id }, `node channel closed: ${why}`);
    socket.close(POLICY, why.slice(0, 120));
    close();
  };
  const close = () => {
    closed = true;
    slots.close();
    stop.abort();
  };
  const answer = async (re: number, run: () => Promise<unknown>) => {
    try {
      send({ type: 'reply', re, ok: true, body: await run() });
    } catch (err) {
      if (!(err instanceof ApiError)) ctx.log.error({ err, node_id: node.id }, 'node channel: message failed');
      send({ type: 'reply', re, ok: false, error: errorBody(err) });
    }
  };
  const pull = async (re: number, max: number) => {
    if (pulling) {
      send({
        type: 'reply',
        re,
        ok: false,
        error: { code: 409, error: 'conflict', message: 'a pull is already waiting on this channel' },
      });
      return;
    }
    pulling = true;
    try {
      while (!closed) {
        nudge = new AbortController();
        const { work } = await pollWork(ctx, node, {
          waitMs: 25_000,
          max,
          signal: stop.signal,
          // A nudge ends a waiting pull so it looks again, but not one a hand-over has reserved:
          // that work is delivered (aborting it would send the work the slow way, through the store).
          wake: nudge.signal,
        });
        if (work.length > 0) {
          if (closed) {
            // Leased to the node but not sent: it comes back with the node's next poll or pull.
            for (const item of work) await undispatchWork(ctx.db, item.work_id);
            await ctx.bus.publish('jobs', `node:${node.id}`);
            return;
          }
          send({ type: 'work', re, work });
          return;
        }
      }
    } catch (err) {
      if (!closed) send({ type: 'reply', re, ok: false, error: errorBody(err) });
    } finally {
      pulling = false;
      nudge = undefined;
    }
  };
  const receipt = async (m: Extract<NodeChannelMessage, { type: 'receipt' }>) => {
    try {
      hop('work.receipt');
      await submitReceipt(ctx, node, m.receipt);
      send({ type: 'ack', re: m.seq, work_ids: [m.work_id] });
      repoll();
    } catch (err) {
      if (err instanceof ApiError && err.code === 'conflict') {
        const applied = await receiptOfWork(ctx.db, m.work_id).catch(() => undefined);
        if (applied && applied.node_id === node.id && applied.signature === m.receipt.signature) {
          send({ type: 'ack', re: m.seq, work_ids: [m.work_id] });
          return;
        }
      }
      if (!(err instanceof ApiError)) ctx.log.error({ err, node_id: node.id }, 'node channel: receipt failed');
      send({ type: 'reply', re: m.seq, ok: false, error: errorBody(err) });
    }
  };
  const handle = (m: NodeChannelMessage): Promise<void> => {
    switch (m.type) {
      case 'pull':
        return pull(m.seq, m.max);
      case 'grant':
        if (!slots.grant(m.slots, m.seq))
          send({
            type: 'reply',
            re: m.seq,
            ok: false,
            error: {
              code: 400,
              error: 'invalid_request',
              message: `a node may hold at most ${NODE_CHANNEL_MAX_GRANTED} granted slots on a channel`,
            },
          });
        return Promise.resolve();
      case 'heartbeat':
        return answer(m.seq, () => heartbeat(ctx, node, m.body));
      case 'events':
        return answer(m.seq, () =>
          forwardEvents(ctx, node, m.work_id, () =>
            m.events.map((e) => (e.type === 'error' ? { ...e, message: e.message.slice(0, 2000) } : e)),
          ),
        );
      case 'result':
        return answer(m.seq, () => deliverResult(ctx, node, m.work_id, m.result));
      case 'receipt':
        return receipt(m);
      case 'fail':
        return answer(m.seq, async () => {
          const answered = await failWork(ctx, node, m.work_id, {
            message: m.message,
            ...(m.retryable === undefined ? {} : { retryable: m.retryable }),
          });
          repoll();
          return answered;
        });
    }
  };
  send({ type: 'hello', node_id: node.id, lease_seconds: ctx.config.leaseSeconds, grants: true });
  return {
    receive(text) {
      if (closed) return;
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch {
        refuse('a message is not JSON');
        return;
      }
      if (!checkMessage.Check(value)) {
        const first = checkMessage.Errors(value).First();
        refuse(`a message does not fit the channel schema${first ? ` (${first.path || '/'}: ${first.message})` : ''}`);
        return;
      }
      if (value.seq <= lastSeq) {
        refuse(`seq ${value.seq} does not follow ${lastSeq}`);
        return;
      }
      lastSeq = value.seq;
      void handle(value).catch((err: unknown) =>
        ctx.log.error({ err, node_id: node.id }, 'node channel: message failed'),
      );
    },
    close,
  };
}

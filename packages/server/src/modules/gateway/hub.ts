import { EventEmitter } from 'node:events';
import type { StreamEventWire } from '@svc/protocol';
import type { ServiceContext } from '../../service-context.js';
import { createRunningAttempts, type RunningAttempts } from './attempts.js';
import type { GatewayRequestRow } from './store.js';

/** One line of `POST /api/v1/node/work/{work_id}/events` (docs/node-protocol.md): the protocol's one shape. */
export type StreamEvent = StreamEventWire;

/**
 * A gateway request completed by a receipt this process accepted: what the request answers with,
 * handed over in memory instead of read back from the store. `output` is absent when the result
 * was uploaded by an earlier call (then it is read from the blob store). A receipt checked in
 * memory hands it over before its records commit: then `request` carries the usage and receipt
 * id, and its charge is settled by the writer's flush.
 */
export interface LocalCompletion {
  receiptId: string;
  request: GatewayRequestRow;
  output?: Buffer;
}

/** What a gateway request following its work hears: streamed events, "its state changed", or its completion. */
export type HubMessage =
  { kind: 'events'; events: StreamEvent[] } | { kind: 'changed' } | { kind: 'completed'; completion: LocalCompletion };

/**
 * Connects the node side of a gateway request to the buyer side, which may be on another
 * instance: events a node posts reach the request's listener in this process directly, or over
 * the bus (`gateway` topic) when the listener lives elsewhere; `work` bus messages (receipt
 * accepted, work failed) reach listeners as `changed`.
 */
export interface GatewayHub {
  /** Listens to one work item until the returned function is called. */
  watch(workId: string, listener: (message: HubMessage) => void): () => void;
  /** Delivers a node's events to whoever follows the work, on any instance. */
  emitEvents(workId: string, events: StreamEvent[]): Promise<void>;
  /**
   * Hands a committed completion to the work's follower when it is in this process (true). Else
   * the caller publishes `work` on the bus: a follower elsewhere reads the outcome from the store.
   */
  completed(workId: string, completion: LocalCompletion): boolean;
  /** The requests this process runs, for receipts checked in memory (attempts.ts). */
  readonly attempts: RunningAttempts;
  close(): Promise<void>;
}

/** PostgreSQL NOTIFY payloads must stay under 8000 bytes. */
const MAX_BUS_PAYLOAD = 7_000;

/** Splits events into bus messages under the payload limit (long deltas are cut in pieces). */
export function busMessages(workId: string, events: readonly StreamEvent[]): string[] {
  const pieces: StreamEvent[] = events.flatMap((e) => {
    // A delta with tool call fragments travels whole: its text is empty or short.
    if (e.type !== 'delta' || e.tool_calls || Buffer.byteLength(e.content, 'utf8') <= MAX_BUS_PAYLOAD / 8) return [e];
    const parts: StreamEvent[] = [];
    for (let i = 0; i < e.content.length; i += MAX_BUS_PAYLOAD / 8)
      parts.push({ type: 'delta', content: e.content.slice(i, i + MAX_BUS_PAYLOAD / 8) });
    return parts;
  });
  const messages: string[] = [];
  let batch: StreamEvent[] = [];
  const flush = () => {
    if (batch.length > 0) messages.push(JSON.stringify({ w: workId, e: batch }));
    batch = [];
  };
  for (const event of pieces) {
    if (batch.length > 0 && JSON.stringify({ w: workId, e: [...batch, event] }).length > MAX_BUS_PAYLOAD) flush();
    batch.push(event);
  }
  flush();
  return messages;
}

/**
 * Builds the hub over a bus (one per process: `ctx.hub`). Call `close` when the process stops.
 *
 * @example
 * const hub = await createGatewayHub({ bus, log });
 * const stop = hub.watch(workId, (m) => console.log(m));
 */
export async function createGatewayHub(ctx: Pick<ServiceContext, 'bus' | 'log'>): Promise<GatewayHub> {
  const emitter = new EventEmitter();
  emitter.setMaxListeners(0);
  const unsubscribeWork = await ctx.bus.subscribe('work', (workId) =>
    emitter.emit(workId, { kind: 'changed' } satisfies HubMessage),
  );
  const unsubscribeEvents = await ctx.bus.subscribe('gateway', (payload) => {
    try {
      const { w, e } = JSON.parse(payload) as { w: string; e: StreamEvent[] };
      if (typeof w === 'string' && Array.isArray(e))
        emitter.emit(w, { kind: 'events', events: e } satisfies HubMessage);
    } catch (err) {
      ctx.log.warn({ err }, 'gateway: unreadable bus message');
    }
  });
  return {
    attempts: createRunningAttempts(),
    watch(workId, listener) {
      emitter.on(workId, listener);
      return () => emitter.off(workId, listener);
    },
    async emitEvents(workId, events) {
      if (events.length === 0) return;
      if (emitter.listenerCount(workId) > 0) {
        emitter.emit(workId, { kind: 'events', events } satisfies HubMessage);
        return;
      }
      for (const message of busMessages(workId, events)) await ctx.bus.publish('gateway', message);
    },
    completed(workId, completion) {
      return emitter.emit(workId, { kind: 'completed', completion } satisfies HubMessage);
    },
    async close() {
      emitter.removeAllListeners();
      // The store may already be closed (shutting down after a failure): nothing left to unsubscribe.
      await unsubscribeWork().catch(() => undefined);
      await unsubscribeEvents().catch(() => undefined);
    },
  };
}

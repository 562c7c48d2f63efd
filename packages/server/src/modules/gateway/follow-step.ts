import type { ToolCallDeltaWire } from '@svc/protocol';
import type { FollowItem } from './follow.js';
import type { StreamEvent } from './hub.js';
import type { WorkState } from '../work/store.js';
import { receiptRefused } from '../work/completion.js';

/** The `done` event a streamed node sends when generation ends (before its receipt). */
export type DoneEvent = Extract<StreamEvent, { type: 'done' }>;

/**
 * Where a gateway request stands while it follows its work: the whole memory of the
 * follow/failover loop, plain and streamed alike.
 */
export interface FollowState {
  stream: boolean;
  /** The node of the current attempt (named in failure messages). */
  nodeId: string;
  /** Attempts made so far (1, or 2 after the one failover). */
  attempts: number;
  /** A byte reached the client (streamed only): from here on failures end the stream, not the request's status. */
  started: boolean;
  /** The client went away. */
  clientGone: boolean;
  /** Text generated so far (billed when the stream ends without a receipt). */
  delivered: string;
  /** Tool call names and argument fragments streamed so far (billed like `delivered`). */
  deliveredTools: string;
  /** The node's `done` event, when it came. */
  done?: DoneEvent;
  /** The node's error event before the first byte; its fail call follows. */
  nodeError?: string;
}

/** What happened: one stream event, the work's end, the deadline, the client, or a failover's outcome. */
export type FollowEvent =
  | { kind: 'delta'; content: string; tool_calls?: ToolCallDeltaWire[] | undefined }
  | { kind: 'done'; event: DoneEvent }
  | { kind: 'node_error'; message: string }
  | { kind: 'ended'; state: WorkState }
  | { kind: 'timeout'; timeoutMs: number }
  | { kind: 'aborted' }
  /** The failover found another node and leased the work to it. */
  | { kind: 'failed_over'; nodeId: string }
  /** The failover found no other eligible node: the attempt's end (`state`, `why`) stands. */
  | { kind: 'no_failover'; state: WorkState; why: string };

/** How the request is ended: its status, the error, what is billed, and what the client is told. */
export interface Ending {
  status: 'failed' | 'timeout' | 'cancelled';
  error: string;
  /** The error code the client sees (an HTTP error before the first byte, an error chunk after). */
  code: 'upstream_error' | 'timeout';
  /**
   * What is billed: `none`; `delivered` (the tokens generated so far); `prompt_and_delivered`
   * (a client that left mid-stream: the prompt estimate and the tokens so far); `node_count`
   * (the node's `done` counts, the answer went out whole but no receipt came).
   */
  bill: 'none' | 'delivered' | 'prompt_and_delivered' | 'node_count';
  /** Tell the node to stop. */
  cancelWork: boolean;
  /**
   * `error`: answer with an HTTP error (nothing was sent yet); `error_chunk`: end the stream with
   * an error chunk; `finish`: end the stream normally without a receipt id; `none`: nobody listens.
   */
  answer: 'error' | 'error_chunk' | 'finish' | 'none';
}

/** What the transport does next. */
export type FollowAction =
  | { type: 'wait' }
  /** Streamed: open the stream if it is not open (the first byte), then write `content` (may be empty) and tool call fragments. */
  | { type: 'write'; content: string; tool_calls?: ToolCallDeltaWire[] | undefined }
  /** The receipt was accepted: answer with the result (a stream sends what it has not yet, then finishes). */
  | { type: 'complete' }
  /** Lease the request to another node (the one retry); without one, step `no_failover` with `state` and `why`. */
  | { type: 'failover'; why: string; state: WorkState }
  | { type: 'end'; ending: Ending };

/** The generated text of tool call fragments: names and argument pieces, as billed. */
function toolText(calls: readonly ToolCallDeltaWire[]): string {
  let text = '';
  for (const c of calls) text += (c.function?.name ?? '') + (c.function?.arguments ?? '');
  return text;
}

/** The sentence a failed attempt leaves for the 502/504 message. */
export function failureMessage(state: WorkState, nodeId: string): string {
  if (state.status === 'lost') return `node ${nodeId} stopped answering (its lease expired before a result)`;
  if (state.status === 'cancelled') return `the work on node ${nodeId} was cancelled`;
  return `node ${nodeId} failed: ${state.error ?? 'no reason given'}`;
}

/** Whether another node may succeed where this attempt failed. */
export function mayRetry(state: WorkState): boolean {
  return state.status === 'lost' || (state.status === 'failed' && state.error_retryable !== false);
}

/** The state a request starts following its first attempt with. */
export function initialFollow(stream: boolean, nodeId: string): FollowState {
  return { stream, nodeId, attempts: 1, started: false, clientGone: false, delivered: '', deliveredTools: '' };
}

const end = (ending: Ending): FollowAction => ({ type: 'end', ending });

/**
 * The follow/failover rules of a gateway request (DESIGN.md section 10), as one pure step:
 * first byte, node failure before it (retried once on another node), failure after it, timeout,
 * client disconnect, completion. Plain and streamed chat both drive it; IO stays with them.
 *
 * @example
 * let s = initialFollow(true, 'node_a');
 * let a: FollowAction;
 * [s, a] = followStep(s, { kind: 'delta', content: 'Hel' }); // a: { type: 'write', content: 'Hel' }
 */
export function followStep(s: FollowState, e: FollowEvent): [FollowState, FollowAction] {
  switch (e.kind) {
    case 'delta': {
      if (!s.stream) return [s, { type: 'wait' }];
      const next = { ...s, delivered: s.delivered + e.content, started: s.started || !s.clientGone };
      if (e.tool_calls) next.deliveredTools = s.deliveredTools + toolText(e.tool_calls);
      if (s.clientGone) return [next, { type: 'wait' }];
      return [
        next,
        e.tool_calls
          ? { type: 'write', content: e.content, tool_calls: e.tool_calls }
          : { type: 'write', content: e.content },
      ];
    }
    case 'done': {
      if (!s.stream) return [s, { type: 'wait' }];
      const next = { ...s, done: e.event, started: s.started || !s.clientGone };
      return [next, s.clientGone ? { type: 'wait' } : { type: 'write', content: '' }];
    }
    case 'node_error': {
      if (!s.stream) return [s, { type: 'wait' }];
      // Before the first byte its fail call follows: then retry or answer 502.
      if (!s.started) return [{ ...s, nodeError: e.message }, { type: 'wait' }];
      return [
        s,
        end({
          status: 'failed',
          error: `node ${s.nodeId} failed mid-stream: ${e.message}`,
          code: 'upstream_error',
          bill: 'delivered',
          cancelWork: false,
          answer: 'error_chunk',
        }),
      ];
    }
    case 'aborted': {
      const next = { ...s, clientGone: true };
      // Everything was generated: the node's receipt settles the request as usual.
      if (s.done) return [next, { type: 'wait' }];
      const error = s.stream ? 'the client disconnected' : 'the caller stopped waiting';
      return [
        next,
        end({
          status: 'cancelled',
          error,
          code: 'timeout',
          bill: s.started ? 'prompt_and_delivered' : 'none',
          cancelWork: true,
          answer: s.stream ? 'none' : 'error',
        }),
      ];
    }
    case 'timeout': {
      const error = s.stream
        ? `node ${s.nodeId} did not finish within ${e.timeoutMs} ms`
        : `no result from node ${s.nodeId} within ${e.timeoutMs} ms`;
      return [
        s,
        end({
          status: 'timeout',
          error,
          code: 'timeout',
          bill: s.started ? 'delivered' : 'none',
          cancelWork: true,
          answer: s.started ? 'error_chunk' : 'error',
        }),
      ];
    }
    case 'ended': {
      if (e.state.status === 'completed') return [s, { type: 'complete' }];
      const why =
        s.nodeError && e.state.status === 'failed'
          ? `node ${s.nodeId} failed: ${s.nodeError}`
          : failureMessage(e.state, s.nodeId);
      if (!s.started && !s.clientGone) {
        if (s.attempts === 1 && mayRetry(e.state)) return [s, { type: 'failover', why, state: e.state }];
        return followStep(s, { kind: 'no_failover', state: e.state, why });
      }
      // Its receipt was refused (over the request's bound): nothing the node claimed is billed.
      if (receiptRefused(e.state))
        return [
          s,
          end({
            status: 'failed',
            error: why,
            code: 'upstream_error',
            bill: 'none',
            cancelWork: false,
            answer: s.clientGone ? 'none' : 'error_chunk',
          }),
        ];
      // The whole answer went out but no receipt came: bill what the node counted.
      if (s.done)
        return [
          s,
          end({
            status: 'failed',
            error: `no receipt: ${why}`,
            code: 'upstream_error',
            bill: 'node_count',
            cancelWork: false,
            answer: s.clientGone ? 'none' : 'finish',
          }),
        ];
      return [
        s,
        end({
          status: 'failed',
          error: why,
          code: 'upstream_error',
          bill: 'delivered',
          cancelWork: false,
          answer: 'error_chunk',
        }),
      ];
    }
    case 'failed_over':
      return [{ ...s, nodeId: e.nodeId, attempts: s.attempts + 1, nodeError: undefined }, { type: 'wait' }];
    case 'no_failover':
      return [
        s,
        end({
          status: 'failed',
          error: e.why,
          code: e.state.status === 'lost' ? 'timeout' : 'upstream_error',
          bill: 'none',
          cancelWork: false,
          answer: 'error',
        }),
      ];
  }
}

/**
 * The step events of one item a follower yields: each stream event in order, or the one event.
 *
 * @example
 * followEvents({ kind: 'events', events: [{ type: 'delta', content: 'a' }] }, 120_000); // [{ kind: 'delta', content: 'a' }]
 */
export function followEvents(item: FollowItem, timeoutMs: number): FollowEvent[] {
  switch (item.kind) {
    case 'events':
      return item.events.map((e): FollowEvent =>
        e.type === 'delta'
          ? { kind: 'delta', content: e.content, tool_calls: e.tool_calls }
          : e.type === 'done'
            ? { kind: 'done', event: e }
            : { kind: 'node_error', message: e.message },
      );
    case 'ended':
      return [{ kind: 'ended', state: item.state }];
    case 'timeout':
      return [{ kind: 'timeout', timeoutMs }];
    case 'aborted':
      return [{ kind: 'aborted' }];
  }
}

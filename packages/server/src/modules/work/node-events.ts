import type { ServiceContext } from '../../service-context.js';
import { ApiError } from '../../platform/errors.js';
import type { NodeRow } from '../nodes/store.js';
import { ToolCallDeltaSchema, type StreamEventWire as StreamEvent, type ToolCallDeltaWire } from '@svc/protocol';
import { TypeCompiler } from '@sinclair/typebox/compiler';
import { findWork } from './store.js';

/** Lines one events call may carry. */
export const MAX_EVENT_LINES = 4096;

const bad = (line: number, message: string) =>
  new ApiError('invalid_request', `line ${line}: ${message}`, [{ path: `/${line - 1}`, message }]);

const checkToolCallDelta = TypeCompiler.Compile(ToolCallDeltaSchema);

const count = (v: unknown) => v === undefined || (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0);

const isToolCallDeltas = (v: unknown): v is ToolCallDeltaWire[] =>
  Array.isArray(v) && v.length <= 128 && v.every((c) => checkToolCallDelta.Check(c));

/**
 * Parses an NDJSON batch of stream events (docs/node-protocol.md): `{type: "delta", content, tool_calls?}`,
 * `{type: "done", usage?, finish_reason?, result_hash?}`, `{type: "error", message, retryable?}`.
 * Blank lines are skipped; anything else is a 400 naming the line.
 *
 * @example
 * parseEvents('{"type":"delta","content":"Hel"}\n{"type":"delta","content":"lo"}\n'); // two deltas
 */
export function parseEvents(text: string): StreamEvent[] {
  const lines = text.split('\n');
  const events: StreamEvent[] = [];
  for (const [i, raw] of lines.entries()) {
    const line = raw.trim();
    if (line === '') continue;
    if (events.length >= MAX_EVENT_LINES) throw bad(i + 1, `more than ${MAX_EVENT_LINES} events in one call`);
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      throw bad(i + 1, 'is not JSON');
    }
    const e = (typeof value === 'object' && value !== null ? value : {}) as Record<string, unknown>;
    if (e.type === 'delta' && typeof e.content === 'string') {
      if (e.tool_calls === undefined) events.push({ type: 'delta', content: e.content });
      else if (isToolCallDeltas(e.tool_calls))
        events.push({ type: 'delta', content: e.content, tool_calls: e.tool_calls });
      else throw bad(i + 1, 'tool_calls must be [{index, id?, type?, function?: {name?, arguments?}}]');
    } else if (e.type === 'error' && typeof e.message === 'string')
      events.push({
        type: 'error',
        message: e.message.slice(0, 2000),
        ...(typeof e.retryable === 'boolean' ? { retryable: e.retryable } : {}),
      });
    else if (e.type === 'done') {
      const usage = (typeof e.usage === 'object' && e.usage !== null ? e.usage : undefined) as
        Record<string, unknown> | undefined;
      if (usage && (!count(usage.prompt_tokens) || !count(usage.completion_tokens)))
        throw bad(i + 1, 'usage counts must be non-negative integers');
      events.push({
        type: 'done',
        ...(usage
          ? {
              usage: {
                prompt_tokens: usage.prompt_tokens as number | undefined,
                completion_tokens: usage.completion_tokens as number | undefined,
              },
            }
          : {}),
        ...(typeof e.finish_reason === 'string' ? { finish_reason: e.finish_reason.slice(0, 64) } : {}),
        ...(typeof e.result_hash === 'string' ? { result_hash: e.result_hash } : {}),
      });
    } else throw bad(i + 1, 'must be {type: "delta", content}, {type: "done", ...} or {type: "error", message}');
  }
  return events;
}

/**
 * `POST /api/v1/node/work/{work_id}/events`: forwards a node's stream events to the owner that
 * waits for them (on any instance). Answers `cancel: true` when the work was cancelled (the
 * client went away): the node must stop and upload nothing.
 */
export async function acceptEvents(ctx: ServiceContext, node: NodeRow, workId: string, text: string) {
  return forwardEvents(ctx, node, workId, () => parseEvents(text));
}

/**
 * The rules of {@link acceptEvents} for events already read (the node channel's `events`
 * message): `read` runs once the work is known to accept events.
 */
export async function forwardEvents(ctx: ServiceContext, node: NodeRow, workId: string, read: () => StreamEvent[]) {
  // A streamed attempt of direct work this process follows, the owner's current one on this node:
  // checked in memory, so the first tokens do not wait for the owner's opening to commit nor read
  // the work row. An owner that ended here (cancelled, timed out) no longer follows it: the
  // store's path answers.
  const owner = ctx.completions.direct;
  if (owner.streamsHere(ctx, workId, node.id)) {
    const events = read();
    await owner.emit(ctx, workId, events);
    return { accepted: events.length, cancel: false };
  }
  // Work dispatched before its owner's opening committed is in the store once that write settles.
  await owner.settled(ctx, [workId]);
  const work = await findWork(ctx.db, workId);
  if (!work || work.node_id !== node.id) throw new ApiError('not_found', `work ${workId} not found for this node`);
  if (work.status === 'cancelled') return { accepted: 0, cancel: true };
  if (!work.stream)
    throw new ApiError('conflict', `work ${workId} is not streamed; upload its result with POST .../result`);
  if (work.status !== 'leased' && work.status !== 'delivered')
    throw new ApiError('conflict', `work ${workId} is ${work.status}; no events are accepted`);
  const events = read();
  await owner.emit(ctx, workId, events);
  return { accepted: events.length, cancel: false };
}

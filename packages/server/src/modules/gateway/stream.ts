import type { ModelUsage, ToolCallDeltaWire, ToolCallWire } from '@svc/protocol';
import type { FastifyReply } from 'fastify';
import type { ServiceContext } from '../../context.js';
import { ApiError, toOpenAiBody } from '../../platform/errors.js';
import { newId } from '../../platform/ids.js';
import type { Principal } from '../../platform/principal.js';
import { chatOutput, chatUsage, type ChatCall } from './chat.js';
import { followWork } from './follow.js';
import { followEvents, initialFollow, type Ending, type FollowAction, type FollowState } from './follow-step.js';
import { estimateTokens } from './pricing.js';
import { finishedOf, openRequest, step, svcNode, type Attempt, type Following } from './service.js';
import { endRequest } from './settle.js';
import { receiptIdOf } from '../receipts/store.js';

/**
 * OpenAI's chat stream on a hijacked reply: `data: {chat.completion.chunk}\n\n` lines, then
 * `data: [DONE]\n\n`. Nothing is written before the node's first event, so a failure before
 * the first byte is still a plain HTTP error (and may be retried on another node).
 */
function createSse(reply: FastifyReply, call: ChatCall, created: number) {
  const res = reply.raw;
  const base = {
    id: call.id,
    object: 'chat.completion.chunk' as const,
    created,
    model: call.model,
    system_fingerprint: null,
  };
  const usageNull = call.includeUsage ? { usage: null } : {};
  const write = (data: unknown) => {
    if (!res.writableEnded && !res.destroyed)
      res.write(`data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`);
  };
  const chunk = (delta: Record<string, unknown>, finishReason: string | null, extra: Record<string, unknown> = {}) => ({
    ...base,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
    ...usageNull,
    ...extra,
  });
  let started = false;
  const end = () => {
    write('[DONE]');
    res.end();
  };
  return {
    get started() {
      return started;
    },
    /** Opens the stream: the head names the node and the receipt the attempt's work will have (its id is the work's). */
    start(attempt: Attempt) {
      if (started) return;
      const node = attempt.node;
      started = true;
      void reply.hijack();
      const kept = Object.entries(reply.getHeaders()).filter(
        (entry): entry is [string, string | number | string[]] => entry[1] !== undefined,
      );
      res.writeHead(200, {
        ...Object.fromEntries(kept),
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-cache',
        connection: 'keep-alive',
        'x-accel-buffering': 'no',
        'x-svc-node': node.id,
        'x-svc-receipt': receiptIdOf(attempt.workId),
        'x-svc-completion-id': call.id,
      });
      write(chunk({ role: 'assistant', content: '' }, null, { svc_node: svcNode(node), ...call.extra }));
    },
    delta(content: string, toolCalls?: readonly ToolCallDeltaWire[]) {
      if (toolCalls)
        write(chunk(content === '' ? { tool_calls: toolCalls } : { content, tool_calls: toolCalls }, null));
      else if (content !== '') write(chunk({ content }, null));
    },
    /** The finish chunk, the usage chunk when asked, `svc_receipt_id` on the last one, and [DONE]. */
    finish(finishReason: string, usage: ReturnType<typeof chatUsage>, receiptId: string | undefined) {
      const receipt = receiptId === undefined ? {} : { svc_receipt_id: receiptId };
      write(chunk({}, finishReason, call.includeUsage ? {} : receipt));
      if (call.includeUsage) write({ ...base, choices: [], usage, ...receipt });
      end();
    },
    /** A failure after the first byte: OpenAI's error envelope in a final `data:` event, then [DONE]. */
    fail(error: ApiError) {
      write(toOpenAiBody(error));
      end();
    },
  };
}

/**
 * Serves a streamed chat completion (DESIGN.md section 10): routes and dispatches like a plain
 * request, forwards each delta the node posts as it arrives, and ends with the finish chunk
 * (carrying `svc_receipt_id`) once the node's receipt is accepted. Before the first byte a node
 * failure is retried once elsewhere; after it the stream ends with an error chunk and only the
 * delivered tokens are billed. A client that disconnects cancels the work (the node is told at
 * its next events call or heartbeat) and is billed the prompt and the tokens generated so far.
 */
export async function streamChat(
  ctx: ServiceContext,
  principal: Principal,
  call: ChatCall,
  reply: FastifyReply,
): Promise<void> {
  const deadline = Date.now() + ctx.config.gatewayTimeoutMs;
  const sse = createSse(reply, call, Math.floor(Date.now() / 1000));
  const gone = new AbortController();
  reply.raw.on('close', () => {
    if (!reply.raw.writableEnded) gone.abort();
  });
  const workId = newId('wrk');
  const follower = followWork(ctx, workId);
  let attempt: Attempt;
  try {
    attempt = await openRequest(ctx, principal, call, workId);
  } catch (err) {
    follower.close();
    throw err;
  }
  const current: Following = { attempt, follower, tried: [attempt.node.id] };
  let state = initialFollow(true, attempt.node.id);
  try {
    for (;;) {
      const item = await current.follower.next(deadline, state.clientGone ? undefined : gone.signal);
      for (const event of followEvents(item, ctx.config.gatewayTimeoutMs)) {
        let action: FollowAction;
        [state, action] = await step(ctx, call, state, event, current);
        if (action.type === 'wait') continue;
        if (action.type === 'write') {
          sse.start(current.attempt);
          sse.delta(action.content, action.tool_calls);
          continue;
        }
        if (action.type === 'complete') {
          const finished = await finishedOf(
            ctx,
            call,
            current.attempt,
            item.kind === 'ended' ? item.completion : undefined,
          );
          if (state.clientGone) return;
          sse.start(current.attempt);
          const out = chatOutput(finished.output);
          // Deltas may trail the receipt over the bus between instances: send what is missing.
          if (out.content.startsWith(state.delivered)) sse.delta(out.content.slice(state.delivered.length));
          if (out.tool_calls && state.deliveredTools === '') sse.delta('', wholeCalls(out.tool_calls));
          sse.finish(out.finish_reason, chatUsage(finished.request.usage), finished.receiptId);
          return;
        }
        if (action.type !== 'end') continue;
        const { ending } = action;
        const usage = billed(call, state, ending);
        await endRequest(ctx, call.id, {
          status: ending.status,
          error: ending.error,
          usage,
          cancelWork: ending.cancelWork,
          ...(ending.status === 'cancelled' ? { earnTo: current.attempt.node } : {}),
        });
        if (ending.answer === 'error') throw new ApiError(ending.code, ending.error);
        if (ending.answer === 'error_chunk') sse.fail(new ApiError(ending.code, ending.error));
        if (ending.answer === 'finish')
          sse.finish(
            state.done?.finish_reason ?? 'stop',
            chatUsage({ prompt_tokens: usage?.prompt_tokens ?? 0, completion_tokens: usage?.completion_tokens ?? 0 }),
            undefined,
          );
        return;
      }
    }
  } catch (err) {
    if (!sse.started) throw err;
    ctx.log.error({ err, request_id: call.id }, 'gateway stream failed');
    await endRequest(ctx, call.id, {
      status: 'failed',
      error: 'internal error',
      usage: { completion_tokens: estimateTokens(state.delivered) },
    }).catch(() => undefined);
    sse.fail(new ApiError('internal', 'internal server error'));
  } finally {
    current.follower.close();
    ctx.hub.attempts.end(call.id);
  }
}

/** Tool calls none of whose fragments were streamed, as one delta of whole calls. */
function wholeCalls(calls: readonly ToolCallWire[]): ToolCallDeltaWire[] {
  return calls.map((c, index) => ({ index, id: c.id, type: 'function', function: c.function }));
}

/** What an ending bills, in tokens (DESIGN.md section 10: usage is billed even when the client leaves). */
function billed(call: ChatCall, state: FollowState, ending: Ending): ModelUsage | undefined {
  const delivered = estimateTokens(state.delivered) + estimateTokens(state.deliveredTools);
  switch (ending.bill) {
    case 'none':
      return undefined;
    case 'delivered':
      return { completion_tokens: delivered };
    case 'prompt_and_delivered':
      return { prompt_tokens: call.promptEstimate, completion_tokens: delivered };
    case 'node_count':
      return {
        prompt_tokens: state.done?.usage?.prompt_tokens ?? call.promptEstimate,
        completion_tokens: state.done?.usage?.completion_tokens ?? delivered,
      };
  }
}

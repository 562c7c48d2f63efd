import type { ToolCallDeltaWire, ToolCallWire } from '@svc/protocol';
import type { FastifyReply } from 'fastify';
import type { ServiceContext } from '../../service-context.js';
import { ApiError, toOpenAiBody } from '../../platform/errors.js';
import type { Principal } from '../../platform/principal.js';
import { chatOutput, chatUsage, type ChatCall } from './chat.js';
import { driveRequest, svcNode, type Attempt, type DriveSink } from './service.js';
import { receiptIdOf } from '../receipts/store.js';

/**
 * OpenAI's chat stream on a hijacked reply, as the drive loop's sink: `data: {chat.completion.chunk}\n\n`
 * lines, then `data: [DONE]\n\n`. Nothing is written before the node's first event, so a failure
 * before the first byte is still a plain HTTP error (and may be retried on another node).
 */
function sseSink(reply: FastifyReply, call: ChatCall, created: number): DriveSink<void> {
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
  /** Opens the stream: the head names the node and the receipt the attempt's work will have (its id is the work's). */
  const start = (attempt: Attempt) => {
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
  };
  const delta = (content: string, toolCalls?: readonly ToolCallDeltaWire[]) => {
    if (toolCalls) write(chunk(content === '' ? { tool_calls: toolCalls } : { content, tool_calls: toolCalls }, null));
    else if (content !== '') write(chunk({ content }, null));
  };
  /** The finish chunk, the usage chunk when asked, `svc_receipt_id` on the last one, and [DONE]. */
  const finish = (finishReason: string, usage: ReturnType<typeof chatUsage>, receiptId: string | undefined) => {
    const receipt = receiptId === undefined ? {} : { svc_receipt_id: receiptId };
    write(chunk({}, finishReason, call.includeUsage ? {} : receipt));
    if (call.includeUsage) write({ ...base, choices: [], usage, ...receipt });
    end();
  };
  /** A failure after the first byte: OpenAI's error envelope in a final `data:` event, then [DONE]. */
  const fail = (error: ApiError) => {
    write(toOpenAiBody(error));
    end();
  };
  return {
    stream: true,
    get started() {
      return started;
    },
    write(attempt, content, toolCalls) {
      start(attempt);
      delta(content, toolCalls);
    },
    complete(finished, state) {
      if (state.clientGone) return;
      start(finished.attempt);
      const out = chatOutput(finished.output);
      // Deltas may trail the receipt over the bus between instances: send what is missing.
      if (out.content.startsWith(state.delivered)) delta(out.content.slice(state.delivered.length));
      if (out.tool_calls && state.deliveredTools === '') delta('', wholeCalls(out.tool_calls));
      finish(out.finish_reason, chatUsage(finished.request.usage), finished.receiptId);
    },
    close(ending, usage, state) {
      if (ending.answer === 'error_chunk') fail(new ApiError(ending.code, ending.error));
      if (ending.answer === 'finish')
        finish(
          state.done?.finish_reason ?? 'stop',
          chatUsage({ prompt_tokens: usage?.prompt_tokens ?? 0, completion_tokens: usage?.completion_tokens ?? 0 }),
          undefined,
        );
    },
    fail,
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
  const sink = sseSink(reply, call, Math.floor(Date.now() / 1000));
  const gone = new AbortController();
  reply.raw.on('close', () => {
    if (!reply.raw.writableEnded) gone.abort();
  });
  await driveRequest(ctx, principal, call, sink, gone.signal);
}

/** Tool calls none of whose fragments were streamed, as one delta of whole calls. */
function wholeCalls(calls: readonly ToolCallWire[]): ToolCallDeltaWire[] {
  return calls.map((c, index) => ({ index, id: c.id, type: 'function', function: c.function }));
}

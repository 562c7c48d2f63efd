import type { FastifyReply } from 'fastify';
import type { ServiceContext } from '../../context.js';
import { ApiError, toOpenAiBody } from '../../platform/errors.js';
import { newId } from '../../platform/ids.js';
import type { Principal } from '../../platform/principal.js';
import { chatOutput, chatUsage, type ChatCall } from './chat.js';
import { followWork } from './follow.js';
import type { StreamEvent } from './hub.js';
import { estimateTokens } from './pricing.js';
import type { RouteCandidate } from './routing.js';
import { failOver, failureMessage, finishedOf, mayRetry, openRequest, svcNode, type Attempt } from './service.js';
import { endRequest } from './settle.js';

/**
 * OpenAI's chat stream on a hijacked reply: `data: {chat.completion.chunk}\n\n` lines, then
 * `data: [DONE]\n\n`. Nothing is written before the node's first event, so a failure before
 * the first byte is still a plain HTTP error (and may be retried on another node).
 */
function createSse(reply: FastifyReply, call: ChatCall, created: number) {
  const res = reply.raw;
  const base = { id: call.id, object: 'chat.completion.chunk' as const, created, model: call.model, system_fingerprint: null };
  const usageNull = call.includeUsage ? { usage: null } : {};
  const write = (data: unknown) => {
    if (!res.writableEnded && !res.destroyed) res.write(`data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`);
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
    start(node: RouteCandidate) {
      if (started) return;
      started = true;
      void reply.hijack();
      const kept = Object.entries(reply.getHeaders()).filter((entry): entry is [string, string | number | string[]] => entry[1] !== undefined);
      res.writeHead(200, {
        ...Object.fromEntries(kept),
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-cache',
        connection: 'keep-alive',
        'x-accel-buffering': 'no',
        'x-svc-node': node.id,
        'x-svc-completion-id': call.id,
      });
      write(chunk({ role: 'assistant', content: '' }, null, { svc_node: svcNode(node), ...call.extra }));
    },
    delta(content: string) {
      if (content !== '') write(chunk({ content }, null));
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
export async function streamChat(ctx: ServiceContext, principal: Principal, call: ChatCall, reply: FastifyReply): Promise<void> {
  const deadline = Date.now() + ctx.config.gatewayTimeoutMs;
  const sse = createSse(reply, call, Math.floor(Date.now() / 1000));
  const gone = new AbortController();
  reply.raw.on('close', () => {
    if (!reply.raw.writableEnded) gone.abort();
  });
  const workId = newId('wrk');
  let follower = followWork(ctx, workId);
  let attempt: Attempt;
  try {
    attempt = await openRequest(ctx, principal, call, workId);
  } catch (err) {
    follower.close();
    throw err;
  }
  const tried = [attempt.node.id];
  let delivered = '';
  let done: Extract<StreamEvent, { type: 'done' }> | undefined;
  let nodeError: string | undefined;
  let clientGone = false;
  const deliveredUsage = () => ({ completion_tokens: estimateTokens(delivered) });
  try {
    for (;;) {
      const item = await follower.next(deadline, clientGone ? undefined : gone.signal);
      if (item.kind === 'aborted') {
        clientGone = true;
        // Everything was generated: the node's receipt settles the request as usual.
        if (done) continue;
        const usage = sse.started ? { prompt_tokens: call.promptEstimate, completion_tokens: estimateTokens(delivered) } : undefined;
        await endRequest(ctx, call.id, { status: 'cancelled', error: 'the client disconnected', usage, earnTo: attempt.node, cancelWork: true });
        return;
      }
      if (item.kind === 'timeout') {
        const error = new ApiError('timeout', `node ${attempt.node.id} did not finish within ${ctx.config.gatewayTimeoutMs} ms`);
        await endRequest(ctx, call.id, { status: 'timeout', error: error.message, usage: sse.started ? deliveredUsage() : undefined, cancelWork: true });
        if (!sse.started) throw error;
        sse.fail(error);
        return;
      }
      if (item.kind === 'events') {
        for (const event of item.events) {
          if (event.type === 'delta') {
            if (!clientGone) {
              sse.start(attempt.node);
              sse.delta(event.content);
            }
            delivered += event.content;
          } else if (event.type === 'done') {
            done = event;
            if (!clientGone) sse.start(attempt.node);
          } else if (!sse.started) {
            nodeError = event.message; // its fail call follows: then retry or answer 502
          } else {
            const error = new ApiError('upstream_error', `node ${attempt.node.id} failed mid-stream: ${event.message}`);
            await endRequest(ctx, call.id, { status: 'failed', error: error.message, usage: deliveredUsage() });
            sse.fail(error);
            return;
          }
        }
        continue;
      }
      const state = item.state;
      if (state.status === 'completed') {
        const finished = await finishedOf(ctx, call, attempt, item.completion);
        if (clientGone) return;
        sse.start(attempt.node);
        const out = chatOutput(finished.output);
        // Deltas may trail the receipt over the bus between instances: send what is missing.
        if (out.content.startsWith(delivered)) sse.delta(out.content.slice(delivered.length));
        sse.finish(out.finish_reason, chatUsage(finished.request.usage), finished.receiptId);
        return;
      }
      const why = nodeError && state.status === 'failed' ? `node ${attempt.node.id} failed: ${nodeError}` : failureMessage(state, attempt.node.id);
      if (!sse.started && !clientGone) {
        if (tried.length === 1 && mayRetry(state)) {
          const next = await failOver(ctx, call, { attempt, follower, tried, why });
          if (next) {
            ({ attempt, follower } = next);
            nodeError = undefined;
            continue;
          }
        }
        await endRequest(ctx, call.id, { status: 'failed', error: why });
        throw new ApiError(state.status === 'lost' ? 'timeout' : 'upstream_error', why);
      }
      if (done) {
        // The whole answer went out but no receipt came: bill what the node counted.
        const usage = { prompt_tokens: done.usage?.prompt_tokens ?? call.promptEstimate, completion_tokens: done.usage?.completion_tokens ?? estimateTokens(delivered) };
        await endRequest(ctx, call.id, { status: 'failed', error: `no receipt: ${why}`, usage });
        if (!clientGone) sse.finish(done.finish_reason ?? 'stop', chatUsage(usage), undefined);
        return;
      }
      await endRequest(ctx, call.id, { status: 'failed', error: why, usage: deliveredUsage() });
      sse.fail(new ApiError('upstream_error', why));
      return;
    }
  } catch (err) {
    if (!sse.started) throw err;
    ctx.log.error({ err, request_id: call.id }, 'gateway stream failed');
    await endRequest(ctx, call.id, { status: 'failed', error: 'internal error', usage: deliveredUsage() }).catch(() => undefined);
    sse.fail(new ApiError('internal', 'internal server error'));
  } finally {
    follower.close();
  }
}

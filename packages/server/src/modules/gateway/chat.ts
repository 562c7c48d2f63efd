import { findModel, usageCostMicro } from '@svc/protocol';
import type { Static } from '@sinclair/typebox';
import { ApiError } from '../../platform/errors.js';
import { estimateTokens, promptTokenBound } from './pricing.js';
import type { ChatCompletionRequest } from './schemas.js';
import { requestId, svcNode, type Finished, type GatewayCall } from './service.js';

/** The largest `max_tokens`, and the default bound when a request names none. */
export const MAX_COMPLETION_TOKENS = 32_768;

export interface ChatCall extends GatewayCall {
  includeUsage: boolean;
  /** The prompt's tokens by the agent's estimate rule: billed when a stream ends with no count. */
  promptEstimate: number;
}

/** The node's chat result (`runGatewayChat` in the agent). */
export interface ChatOutput {
  content: string;
  finish_reason: string;
  usage?: { prompt_tokens?: number; completion_tokens?: number };
}

/**
 * Turns a validated `POST /v1/chat/completions` body into a gateway call. The schema has already
 * checked every field's type and range; this applies the rules across fields and the defaults
 * (temperature 0.7). Without `max_tokens` the node's engine decides the length, and the hold
 * assumes the model's whole context (at most 32768 tokens).
 *
 * @example
 * prepareChat({ model: 'tinyllama', messages: [{ role: 'user', content: 'hi' }] }).payload.temperature; // 0.7
 */
export function prepareChat(body: Static<typeof ChatCompletionRequest>): ChatCall {
  if (body.knowledge_base !== undefined && body.knowledge_base !== null) throw new ApiError('not_found', `knowledge base ${body.knowledge_base} not found`);
  const model = findModel(body.model);
  if (!model || model.type !== 'chat') throw new ApiError('invalid_request', `model ${body.model} is not a chat model`, [{ path: '/model', message: 'must be a catalogue chat model' }]);
  const asked = body.max_tokens ?? body.max_completion_tokens ?? undefined;
  // Without max_tokens the engine's own default applies; the completion cannot outgrow the context.
  const bound = asked ?? Math.min(model.context_length ?? MAX_COMPLETION_TOKENS, MAX_COMPLETION_TOKENS);
  const messages = body.messages.map((m) => ({ role: m.role, content: m.content }));
  const stream = body.stream === true;
  const contents = messages.map((m) => m.content);
  return {
    id: requestId('chatcmpl'),
    type: 'chat',
    model: model.id,
    payload: { model: model.id, messages, ...(asked === undefined ? {} : { max_tokens: asked }), temperature: body.temperature ?? 0.7, stream },
    stream,
    route: {
      jurisdiction: body.jurisdiction ?? undefined,
      strict_jurisdiction: body.strict_jurisdiction ?? undefined,
      requires_tee: body.requires_tee ?? undefined,
    },
    maxMicro: usageCostMicro(model.id, { prompt_tokens: promptTokenBound(contents), completion_tokens: bound }),
    includeUsage: body.stream_options?.include_usage === true,
    promptEstimate: contents.reduce((sum, c) => sum + estimateTokens(c), 0),
  };
}

/** Reads the node's chat result; a result of another shape is the node's fault (502). */
export function chatOutput(bytes: Buffer): ChatOutput {
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString('utf8'));
  } catch {
    throw new ApiError('upstream_error', 'the node returned a chat result that is not JSON');
  }
  const out = value as Partial<ChatOutput> | null;
  if (!out || typeof out.content !== 'string') throw new ApiError('upstream_error', 'the node returned a chat result without content');
  return { content: out.content, finish_reason: typeof out.finish_reason === 'string' ? out.finish_reason : 'stop', ...(out.usage ? { usage: out.usage } : {}) };
}

/** `usage` of a chat response: the billed counts (from the receipt). */
export function chatUsage(usage: Record<string, number> | null) {
  const prompt = usage?.prompt_tokens ?? 0;
  const completion = usage?.completion_tokens ?? 0;
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

/** The OpenAI `chat.completion` object, with `svc_node` and `svc_receipt_id`. */
export function chatCompletionView(call: ChatCall, done: Finished, created: number) {
  const out = chatOutput(done.output);
  return {
    id: call.id,
    object: 'chat.completion' as const,
    created,
    model: call.model,
    system_fingerprint: null,
    choices: [{ index: 0, message: { role: 'assistant' as const, content: out.content }, logprobs: null, finish_reason: out.finish_reason }],
    usage: chatUsage(done.request.usage),
    svc_node: svcNode(done.attempt.node),
    svc_receipt_id: done.receiptId,
  };
}

import { usageCostMicro } from '@svc/protocol';
import type { Static } from '@sinclair/typebox';
import { ApiError } from '../../platform/errors.js';
import { estimateTokens, promptTokenBound } from './pricing.js';
import type { ChatCompletionRequest } from './schemas.js';
import { requestId, svcNode, type Finished, type GatewayCall } from './service.js';
import { requireModel } from './models.js';

/** The largest `max_tokens`, and the default bound when a request names none. */
export const MAX_COMPLETION_TOKENS = 32_768;

export interface ChatCall extends GatewayCall {
  includeUsage: boolean;
  /** The prompt's tokens by the agent's estimate rule: billed when a stream ends with no count. */
  promptEstimate: number;
  /** The completion tokens the hold assumes: `max_tokens`, or the model's context. */
  completionBound: number;
  /** `knowledge_base`: ground the answer in this knowledge base (modules/knowledge). */
  knowledgeBase?: { id: string; topK: number | undefined };
  /** Extra fields of the answer (and of a stream's first chunk), e.g. `sources`. */
  extra?: Record<string, unknown>;
}

/** The prompt-dependent parts of a chat call, recomputed whenever its messages change. */
function promptParts(model: string, messages: readonly { content: string }[], completionBound: number) {
  const contents = messages.map((m) => m.content);
  return {
    maxMicro: usageCostMicro(model, { prompt_tokens: promptTokenBound(contents), completion_tokens: completionBound }),
    promptEstimate: contents.reduce((sum, c) => sum + estimateTokens(c), 0),
  };
}

/**
 * The call with `message` placed before the conversation (a grounded answer's sources), its hold
 * and prompt estimate recomputed, and `extra` fields added to the answer.
 *
 * @example
 * withSystemContext(call, 'Answer from these sources: ...', { sources }).payload.messages[0].role; // 'system'
 */
export function withSystemContext(call: ChatCall, message: string, extra: Record<string, unknown>): ChatCall {
  const messages = [
    { role: 'system' as const, content: message },
    ...(call.payload.messages as { role: string; content: string }[]),
  ];
  return {
    ...call,
    ...promptParts(call.model, messages, call.completionBound),
    payload: { ...call.payload, messages },
    extra: { ...call.extra, ...extra },
  };
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
 * assumes the model's whole context (at most 32768 tokens). `knowledge_base` is only noted here:
 * the route grounds the call (modules/knowledge) before it is dispatched.
 *
 * @example
 * prepareChat({ model: 'tinyllama', messages: [{ role: 'user', content: 'hi' }] }).payload.temperature; // 0.7
 */
export function prepareChat(body: Static<typeof ChatCompletionRequest>): ChatCall {
  const model = requireModel(body.model, 'chat');
  const asked = body.max_tokens ?? body.max_completion_tokens ?? undefined;
  // Without max_tokens the engine's own default applies; the completion cannot outgrow the context.
  const bound = asked ?? Math.min(model.context_length ?? MAX_COMPLETION_TOKENS, MAX_COMPLETION_TOKENS);
  const messages = body.messages.map((m) => ({ role: m.role, content: m.content }));
  const stream = body.stream === true;
  const kb = body.knowledge_base ?? undefined;
  return {
    id: requestId('chatcmpl'),
    type: 'chat',
    model: model.id,
    payload: {
      model: model.id,
      messages,
      ...(asked === undefined ? {} : { max_tokens: asked }),
      temperature: body.temperature ?? 0.7,
      stream,
    },
    stream,
    route: {
      jurisdiction: body.jurisdiction ?? undefined,
      strict_jurisdiction: body.strict_jurisdiction ?? undefined,
      requires_tee: body.requires_tee ?? undefined,
    },
    ...promptParts(model.id, messages, bound),
    completionBound: bound,
    includeUsage: body.stream_options?.include_usage === true,
    ...(kb === undefined ? {} : { knowledgeBase: { id: kb, topK: body.knowledge_base_top_k ?? undefined } }),
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
  if (!out || typeof out.content !== 'string')
    throw new ApiError('upstream_error', 'the node returned a chat result without content');
  return {
    content: out.content,
    finish_reason: typeof out.finish_reason === 'string' ? out.finish_reason : 'stop',
    ...(out.usage ? { usage: out.usage } : {}),
  };
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
    choices: [
      {
        index: 0,
        message: { role: 'assistant' as const, content: out.content },
        logprobs: null,
        finish_reason: out.finish_reason,
      },
    ],
    usage: chatUsage(done.request.usage),
    svc_node: svcNode(done.attempt.node),
    svc_receipt_id: done.receiptId,
    ...call.extra,
  };
}

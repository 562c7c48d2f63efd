import { CHAT_FIELDS, usageCostMicro, type ToolCallWire } from '@svc/protocol';
import type { Static } from '@sinclair/typebox';
import { ApiError } from '../../platform/errors.js';
import { estimateTokens, promptTokenBound } from './pricing.js';
import type { ChatCompletionRequest } from './schemas.js';
import { requestId, svcNode, type Finished, type GatewayCall } from './service.js';
import { requireModel } from './models.js';

const NO_TEXTS: readonly string[] = Object.freeze([]);
const NO_FIELDS: object = Object.freeze({});

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
  /** Prompt text besides the messages' (the tools' and the response schema's JSON): the hold covers it. */
  promptExtra: readonly string[];
}

/** A chat message as the node receives it: OpenAI's, tool calls and results included. */
export interface PayloadMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string | null;
  tool_calls?: unknown[];
  tool_call_id?: string;
}

/** The prompt-dependent parts of a chat call, recomputed whenever its messages change. */
function promptParts(
  model: string,
  messages: readonly PayloadMessage[],
  completionBound: number,
  extra: readonly string[],
) {
  const contents = messages.map((m) =>
    m.tool_calls ? `${m.content ?? ''}${JSON.stringify(m.tool_calls)}` : (m.content ?? ''),
  );
  contents.push(...extra);
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
  const messages: PayloadMessage[] = [
    { role: 'system', content: message },
    ...(call.payload.messages as PayloadMessage[]),
  ];
  return {
    ...call,
    ...promptParts(call.model, messages, call.completionBound, call.promptExtra),
    payload: { ...call.payload, messages },
    extra: { ...call.extra, ...extra },
  };
}

/** The node's chat result (`runGatewayChat` in the agent). */
export interface ChatOutput {
  content: string;
  finish_reason: string;
  usage?: { prompt_tokens?: number; completion_tokens?: number };
  /** The calls the model made (`finish_reason` `tool_calls`). */
  tool_calls?: ToolCallWire[];
}

type ChatBody = Static<typeof ChatCompletionRequest>;

const invalid = (path: string, message: string, sentence: string) =>
  new ApiError('invalid_request', `invalid body: ${sentence}`, [{ path, message }]);

/**
 * The messages as the node receives them, checked across fields: `content` null only on an
 * assistant message with `tool_calls`, a `tool` message names its `tool_call_id`.
 */
function payloadMessages(body: ChatBody): { messages: PayloadMessage[]; toolTurns: boolean } {
  let toolTurns = false;
  const messages = body.messages.map((m, i): PayloadMessage => {
    const calls = m.tool_calls ?? undefined;
    if (m.content === null && !(m.role === 'assistant' && calls && calls.length > 0))
      throw invalid(
        `/messages/${i}/content`,
        'must be a string',
        `/messages/${i}/content may be null only on an assistant message with tool_calls`,
      );
    if (m.role === 'tool') {
      const id = m.tool_call_id ?? undefined;
      if (id === undefined)
        throw invalid(
          `/messages/${i}/tool_call_id`,
          'is required',
          `/messages/${i}/tool_call_id is required on a tool message`,
        );
      toolTurns = true;
      return { role: 'tool', content: m.content, tool_call_id: id };
    }
    if (calls && calls.length > 0 && m.role === 'assistant') {
      toolTurns = true;
      return { role: 'assistant', content: m.content, tool_calls: calls };
    }
    return { role: m.role, content: m.content };
  });
  return { messages, toolTurns };
}

/**
 * The chat fields beyond the plain ones the request uses (routing needs a node honouring each),
 * and the payload fields carrying them, unchanged. `n: 1` and `response_format: {type: "text"}`
 * are plain; a conversation with tool turns uses `tools`.
 */
function surfaceOf(body: ChatBody, toolTurns: boolean): { fields: readonly string[]; payload: object } {
  // A plain request allocates nothing here (the gateway's per-request cost).
  let fields: string[] | undefined;
  let payload: Record<string, unknown> | undefined;
  const record = body as Record<string, unknown>;
  for (const field of CHAT_FIELDS) {
    const value = record[field];
    if (value === undefined || value === null || (field === 'n' && value === 1)) continue;
    (payload ??= {})[field] = value;
    if (field === 'response_format' && body.response_format?.type === 'text') continue;
    (fields ??= []).push(field);
  }
  if (toolTurns && !fields?.includes('tools')) (fields ??= []).unshift('tools');
  const choice = body.tool_choice ?? undefined;
  if (choice !== undefined && !body.tools)
    throw invalid('/tool_choice', 'needs tools', '/tool_choice is only allowed when tools are given');
  if (typeof choice === 'object' && !body.tools?.some((t) => t.function.name === choice.function.name))
    throw invalid('/tool_choice', 'names no tool', `/tool_choice names ${choice.function.name}, which is not in tools`);
  return { fields: fields ?? NO_TEXTS, payload: payload ?? NO_FIELDS };
}

/** Prompt text of the surface fields: the tools' definitions and the response schema. */
function promptExtraOf(body: ChatBody): string[] {
  const extra: string[] = [];
  if (body.tools) extra.push(JSON.stringify(body.tools));
  const format = body.response_format;
  if (format?.type === 'json_schema') extra.push(JSON.stringify(format.json_schema));
  return extra;
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
export function prepareChat(body: ChatBody): ChatCall {
  const model = requireModel(body.model, 'chat');
  const asked = body.max_tokens ?? body.max_completion_tokens ?? undefined;
  // Without max_tokens the engine's own default applies; the completion cannot outgrow the context.
  const bound = asked ?? Math.min(model.context_length ?? MAX_COMPLETION_TOKENS, MAX_COMPLETION_TOKENS);
  const { messages, toolTurns } = payloadMessages(body);
  const surface = surfaceOf(body, toolTurns);
  const promptExtra = surface.fields.length === 0 ? NO_TEXTS : promptExtraOf(body);
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
      ...surface.payload,
    },
    stream,
    route: {
      jurisdiction: body.jurisdiction ?? undefined,
      strict_jurisdiction: body.strict_jurisdiction ?? undefined,
      requires_tee: body.requires_tee ?? undefined,
      ...(surface.fields.length === 0 ? {} : { fields: surface.fields }),
    },
    ...promptParts(model.id, messages, bound, promptExtra),
    promptExtra,
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
  if (out.tool_calls !== undefined && !isToolCalls(out.tool_calls))
    throw new ApiError('upstream_error', 'the node returned malformed tool calls');
  return {
    content: out.content,
    finish_reason: typeof out.finish_reason === 'string' ? out.finish_reason : 'stop',
    ...(out.usage ? { usage: out.usage } : {}),
    ...(out.tool_calls && out.tool_calls.length > 0 ? { tool_calls: out.tool_calls } : {}),
  };
}

function isToolCalls(value: unknown): value is ToolCallWire[] {
  return (
    Array.isArray(value) &&
    value.every((c: Partial<ToolCallWire> | null) => {
      const fn = c?.function;
      return typeof c?.id === 'string' && typeof fn?.name === 'string' && typeof fn.arguments === 'string';
    })
  );
}

/** `usage` of a chat response: the billed counts (from the receipt). */
export function chatUsage(usage: Record<string, number> | null) {
  const prompt = usage?.prompt_tokens ?? 0;
  const completion = usage?.completion_tokens ?? 0;
  return { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
}

/**
 * OpenAI's answer message: `content` null when the answer is tool calls and no text.
 *
 * @example
 * assistantMessage({ content: '', finish_reason: 'tool_calls', tool_calls }); // { role: 'assistant', content: null, tool_calls }
 */
export function assistantMessage(out: ChatOutput) {
  if (!out.tool_calls) return { role: 'assistant' as const, content: out.content };
  return { role: 'assistant' as const, content: out.content === '' ? null : out.content, tool_calls: out.tool_calls };
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
        message: assistantMessage(out),
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

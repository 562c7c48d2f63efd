import type { ChatMessage } from '../engines/interface.js';
import type { WorkItem } from '../wire.js';
import { engineFor, jsonOutput, meterCount, optionalNumber, workModel, WorkError, type RunContext, type RunOutput } from './types.js';

/** Refusal for `stream: true` work: this agent version uploads whole results only. */
export const STREAMING_UNSUPPORTED = 'streaming work is not supported by this agent version';

const ROLES = new Set(['system', 'user', 'assistant']);

function chatMessages(value: unknown): ChatMessage[] {
  const valid =
    Array.isArray(value) &&
    value.length > 0 &&
    value.every((m: unknown) => typeof m === 'object' && m !== null && ROLES.has(String((m as Record<string, unknown>).role)) && typeof (m as Record<string, unknown>).content === 'string');
  if (!valid) throw new WorkError('payload.messages must be a non-empty array of {role: system|user|assistant, content: string}', false);
  return (value as Record<string, unknown>[]).map((m) => ({ role: m.role as ChatMessage['role'], content: String(m.content) }));
}

/**
 * Gateway `chat` work, not streamed: payload `{model, messages, max_tokens?, temperature?}`.
 * Output `{content, finish_reason, usage}`; units are prompt plus completion tokens.
 *
 * @example
 * const out = await runGatewayChat(item, ctx);
 */
export async function runGatewayChat(item: WorkItem, ctx: RunContext): Promise<RunOutput> {
  if (item.stream || item.payload.stream === true) throw new WorkError(STREAMING_UNSUPPORTED, false);
  const model = workModel(item);
  const engine = engineFor(ctx.engines, model);
  const max_tokens = optionalNumber(item.payload.max_tokens, 'max_tokens');
  const temperature = optionalNumber(item.payload.temperature, 'temperature');
  const request = {
    model: model ?? '',
    messages: chatMessages(item.payload.messages),
    ...(max_tokens === undefined ? {} : { max_tokens }),
    ...(temperature === undefined ? {} : { temperature }),
  };
  const answer = await engine.chat(request, { signal: ctx.signal });
  const usage = { prompt_tokens: meterCount(answer.usage.prompt_tokens), completion_tokens: meterCount(answer.usage.completion_tokens) };
  const output = { content: answer.content, finish_reason: answer.finish_reason, usage };
  return jsonOutput(output, { metering_units: usage.prompt_tokens + usage.completion_tokens, usage, engine: engine.name });
}

/**
 * Gateway `embeddings` work: payload `{model, input}` (a string or an array of strings).
 * Output `{data: [{index, embedding}], usage: {prompt_tokens}}`; units are the input tokens.
 *
 * @example
 * const out = await runGatewayEmbeddings(item, ctx);
 */
export async function runGatewayEmbeddings(item: WorkItem, ctx: RunContext): Promise<RunOutput> {
  if (item.stream) throw new WorkError(STREAMING_UNSUPPORTED, false);
  const model = workModel(item);
  const engine = engineFor(ctx.engines, model);
  const raw = item.payload.input;
  const input = typeof raw === 'string' ? [raw] : raw;
  if (!Array.isArray(input) || input.length === 0 || !input.every((v): v is string => typeof v === 'string')) {
    throw new WorkError('payload.input must be a string or a non-empty array of strings', false);
  }
  const answer = await engine.embed({ model: model ?? '', input }, { signal: ctx.signal });
  const tokens = meterCount(answer.prompt_tokens);
  const output = { data: answer.embeddings.map((embedding, index) => ({ index, embedding })), usage: { prompt_tokens: tokens } };
  return jsonOutput(output, { metering_units: tokens, usage: { prompt_tokens: tokens }, engine: engine.name });
}

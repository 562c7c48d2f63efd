import { defaultCompletionTokens, meteringBound } from '@svc/protocol';
import type { GatewayType } from './pricing.js';

/**
 * The metering bound of a gateway request (issue 40 point 6): the most `metering_units` its
 * node's receipt may sign, from what the node was handed. Kept in the request's metadata as
 * `max_units` when it opens, so that a receipt checked in memory and one read from the store meet
 * the same bound.
 */

/** Payload fields of a chat that are not prompt text. */
const CHAT_PLAIN_FIELDS = new Set(['model', 'messages', 'max_tokens', 'temperature', 'stream']);

/** A message's text as it may reach the prompt: its content and, as JSON, whatever else it carries (tool calls). */
function messageText(message: unknown): string {
  if (typeof message !== 'object' || message === null) return '';
  const { role: _role, content, ...rest } = message as Record<string, unknown>;
  const text = typeof content === 'string' ? content : '';
  return Object.keys(rest).length > 0 ? text + JSON.stringify(rest) : text;
}

/**
 * The most metering units the receipt of a request may sign: `maxUnits` when its type set it
 * (transcription: the audio's seconds), else from the payload the node receives. Chat counts
 * every message and every other field the node is handed beyond the plain ones (tools, a
 * response schema) as prompt text, and `max_tokens` or the model's default as the completion.
 * Undefined when the payload says nothing (a rebuilt opening's empty payload).
 *
 * @example
 * requestMaxUnits({ type: 'chat', model: 'tinyllama', payload: { messages: [{ role: 'user', content: 'hi' }], max_tokens: 16 } }); // 290
 */
export function requestMaxUnits(call: {
  type: GatewayType;
  model: string;
  payload: Record<string, unknown>;
  maxUnits?: number | undefined;
}): number | undefined {
  if (call.maxUnits !== undefined) return call.maxUnits;
  const p = call.payload;
  switch (call.type) {
    case 'chat': {
      if (!Array.isArray(p.messages)) return undefined;
      const extra = Object.entries(p)
        .filter(([key, value]) => !CHAT_PLAIN_FIELDS.has(key) && value !== undefined)
        .map(([key, value]) => `${key}${JSON.stringify(value)}`);
      const maxTokens = typeof p.max_tokens === 'number' ? p.max_tokens : defaultCompletionTokens(call.model);
      return meteringBound({ type: 'chat', prompts: [...p.messages.map(messageText), ...extra], maxTokens });
    }
    case 'embeddings': {
      const inputs = typeof p.input === 'string' ? [p.input] : p.input;
      if (!Array.isArray(inputs)) return undefined;
      return meteringBound({ type: 'embeddings', inputs: inputs.map((i) => (typeof i === 'string' ? i : '')) });
    }
    case 'image':
      return typeof p.n === 'number' ? meteringBound({ type: 'image', n: p.n }) : undefined;
    case 'transcription':
      return undefined;
  }
}

/**
 * The bound a request's metadata keeps (`max_units`), undefined for a request opened without one.
 *
 * @example
 * boundOfRequest({ metadata: { max_units: 290 } }); // 290
 */
export function boundOfRequest(request: { metadata: Record<string, unknown> }): number | undefined {
  const bound = request.metadata.max_units;
  return typeof bound === 'number' ? bound : undefined;
}

import type { ChatMessage } from './interface.js';

/**
 * Token counts for when an upstream does not report usage. The rule, documented for operators
 * and buyers in docs/engines.md: a text costs ceil(UTF-8 bytes / 4) tokens, and at least 1 when
 * it is not empty (an empty text costs 0). English averages about four bytes per token in the
 * common BPE vocabularies, so the estimate is close for prose and errs high for other scripts.
 *
 * @example
 * estimateTokens('hello world'); // 3 (11 bytes)
 * estimateTokens('é'); // 1 (2 bytes)
 */
export function estimateTokens(text: string): number {
  if (text.length === 0) return 0;
  return Math.max(1, Math.ceil(Buffer.byteLength(text, 'utf8') / 4));
}

/**
 * A chat prompt's estimated tokens: the sum of {@link estimateTokens} over the messages'
 * contents and tool calls (their JSON; role names and template framing are not counted).
 *
 * @example
 * estimateChatPromptTokens([{ role: 'user', content: 'hello world' }]); // 3
 */
export function estimateChatPromptTokens(messages: readonly ChatMessage[]): number {
  return messages.reduce(
    (sum, m) =>
      sum + estimateTokens(m.content ?? '') + (m.tool_calls ? estimateTokens(JSON.stringify(m.tool_calls)) : 0),
    0,
  );
}

/** Estimated tokens of several texts (embedding inputs), summed. */
export function estimateInputTokens(inputs: readonly string[]): number {
  return inputs.reduce((sum, input) => sum + estimateTokens(input), 0);
}

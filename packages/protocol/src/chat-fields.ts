import { Type, type Static } from '@sinclair/typebox';

/**
 * The chat request fields beyond the plain ones (`model`, `messages` of system/user/assistant
 * text, `temperature`, `max_tokens`, `stream`) that a node's engine may or may not honour
 * (DESIGN.md section 10, "The whole chat surface"). A node declares, per catalogue chat model,
 * the ones its engine honours (`chat_fields` of its registration); one that declares nothing
 * honours only the plain fields. `n` stands for `n` above 1 (`n: 1` is plain); `tools` also
 * covers a conversation carrying tool calls or `role: "tool"` results.
 */
export const CHAT_FIELDS = [
  'tools',
  'tool_choice',
  'parallel_tool_calls',
  'response_format',
  'stop',
  'top_p',
  'seed',
  'presence_penalty',
  'frequency_penalty',
  'logit_bias',
  'user',
  'n',
] as const;
export type ChatField = (typeof CHAT_FIELDS)[number];

/**
 * `chat_fields` of a registration: catalogue chat model id -> the {@link CHAT_FIELDS} its engine
 * on this node honours. Optional: agents older than it declare nothing.
 *
 * @example
 * Value.Check(ChatFieldsSchema, { tinyllama: ['stop', 'seed', 'response_format'] }); // true
 */
export const ChatFieldsSchema = Type.Record(
  Type.String({ maxLength: 64 }),
  Type.Array(Type.Union(CHAT_FIELDS.map((f) => Type.Literal(f))), { maxItems: CHAT_FIELDS.length, uniqueItems: true }),
  {
    maxProperties: 64,
    description: 'per catalogue chat model, the request fields beyond the plain ones its engine honours',
  },
);
export type ChatFieldsWire = Static<typeof ChatFieldsSchema>;

/**
 * One tool call fragment of a streamed answer, OpenAI's `delta.tool_calls[i]`: the first fragment
 * of a call has its `id` and function `name`, the next ones add to its `arguments`.
 */
export const ToolCallDeltaSchema = Type.Object({
  index: Type.Integer({ minimum: 0, maximum: 127 }),
  id: Type.Optional(Type.String({ maxLength: 256 })),
  type: Type.Optional(Type.Literal('function')),
  function: Type.Optional(
    Type.Object({
      name: Type.Optional(Type.String({ maxLength: 256 })),
      arguments: Type.Optional(Type.String()),
    }),
  ),
});
export type ToolCallDeltaWire = Static<typeof ToolCallDeltaSchema>;

/** A whole tool call of an answer, OpenAI's `message.tool_calls[i]`. */
export interface ToolCallWire {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

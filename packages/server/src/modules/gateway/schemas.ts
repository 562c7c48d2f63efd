import { modelsOfType } from '@svc/protocol';
import { Type, type TSchema } from '@sinclair/typebox';
import { StringEnum } from '../../platform/schemas.js';
import { ModelListSchema } from '@svc/protocol/rest';

/** Shapes the dashboard reads too: defined once in `@svc/protocol/rest`, named here as the routes use them. */
export const ModelList = ModelListSchema;

/**
 * The gateway's wire format: OpenAI's, plus the routing fields of api-spec.md part 4. Objects stay
 * open (OpenAI SDKs send fields of their own); the chat fields an engine may not honour are all
 * named here (`ChatSurface`), so none is dropped in silence.
 */

const ids = (type: Parameters<typeof modelsOfType>[0]) => modelsOfType(type).map((m) => m.id);
/**
 * A model id: any string, so that one outside the catalogue (or of another type) is OpenAI's
 * `404 model_not_found` from the route, not a schema 400 (docs/errors.md).
 */
const modelId = (type: Parameters<typeof modelsOfType>[0]) =>
  Type.String({
    minLength: 1,
    maxLength: 256,
    description: `a catalogue ${type} model (GET /v1/models): ${ids(type).join(', ')}; any other is 404 model_not_found`,
  });

/** OpenAI clients send `null` for unset optional fields; OpenAPI 3.0.3 spells that `nullable`. */
const nullable = <T extends TSchema>(schema: T) => Type.Unsafe<T['static'] | null>({ ...schema, nullable: true });

/** A union that may be null: OpenAPI 3.0.3 has no null type, so its first member carries `nullable`. */
const nullableUnion = <T extends TSchema, R extends TSchema[]>(first: T, ...rest: R) =>
  Type.Union([nullable(first), ...rest]);

const Country = Type.String({ pattern: '^[A-Z]{2}$', description: 'ISO 3166-1 alpha-2, upper case' });

export const Routing = {
  jurisdiction: Type.Optional(
    nullable(
      Type.String({ pattern: '^[A-Z]{2}$', description: 'preferred country (soft): nodes there are tried first' }),
    ),
  ),
  strict_jurisdiction: Type.Optional(
    nullable(
      Type.String({
        pattern: '^[A-Z]{2}$',
        description: 'only nodes in this country (hard): 503 no_capacity when none is live',
      }),
    ),
  ),
  requires_tee: Type.Optional(nullable(Type.Boolean({ description: 'only nodes with a verified TEE attestation' }))),
};

/** A tool call of an assistant message (OpenAI's `tool_calls[i]`), as the client sends it back. */
const ToolCall = Type.Object(
  {
    id: Type.String({ minLength: 1, maxLength: 256 }),
    type: Type.Literal('function'),
    function: Type.Object(
      { name: Type.String({ minLength: 1, maxLength: 256 }), arguments: Type.String({ maxLength: 1_000_000 }) },
      { additionalProperties: true },
    ),
  },
  { additionalProperties: true },
);

export const ChatMessage = Type.Object(
  {
    role: StringEnum(['system', 'user', 'assistant', 'tool'] as const),
    content: nullable(
      Type.String({
        maxLength: 1_000_000,
        description: 'a string; null only on an assistant message with tool_calls',
      }),
    ),
    tool_calls: Type.Optional(
      nullable(Type.Array(ToolCall, { maxItems: 128, description: 'assistant: the calls it made' })),
    ),
    tool_call_id: Type.Optional(
      nullable(Type.String({ minLength: 1, maxLength: 256, description: 'tool: the call this result answers' })),
    ),
  },
  { additionalProperties: true },
);

/** A function's (or a response schema's) name, as OpenAI allows it. */
const FunctionName = Type.String({ pattern: '^[A-Za-z0-9_-]{1,64}$' });

/** A function the model may call (OpenAI's `tools[i]`). */
const Tool = Type.Object(
  {
    type: Type.Literal('function'),
    function: Type.Object(
      {
        name: FunctionName,
        description: Type.Optional(nullable(Type.String({ maxLength: 100_000 }))),
        parameters: Type.Optional(nullable(Type.Object({}, { additionalProperties: true }))),
        strict: Type.Optional(nullable(Type.Boolean())),
      },
      { additionalProperties: true },
    ),
  },
  { additionalProperties: true },
);

/**
 * The chat fields beyond the plain ones (DESIGN.md section 10, "The whole chat surface"): each
 * reaches the node's engine unchanged, or the request is a 400 naming it when no eligible node's
 * engine honours it.
 */
const ChatSurface = {
  tools: Type.Optional(nullable(Type.Array(Tool, { minItems: 1, maxItems: 128 }))),
  tool_choice: Type.Optional(
    nullableUnion(
      StringEnum(['none', 'auto', 'required'] as const),
      Type.Object(
        {
          type: Type.Literal('function'),
          function: Type.Object({ name: FunctionName }),
        },
        { additionalProperties: true },
      ),
    ),
  ),
  parallel_tool_calls: Type.Optional(nullable(Type.Boolean())),
  response_format: Type.Optional(
    nullableUnion(
      Type.Object({ type: StringEnum(['text', 'json_object'] as const) }, { additionalProperties: true }),
      Type.Object(
        {
          type: Type.Literal('json_schema'),
          json_schema: Type.Object(
            {
              name: FunctionName,
              description: Type.Optional(nullable(Type.String({ maxLength: 100_000 }))),
              schema: Type.Optional(nullable(Type.Object({}, { additionalProperties: true }))),
              strict: Type.Optional(nullable(Type.Boolean())),
            },
            { additionalProperties: true },
          ),
        },
        { additionalProperties: true },
      ),
    ),
  ),
  stop: Type.Optional(
    nullableUnion(
      Type.String({ minLength: 1, maxLength: 1000 }),
      Type.Array(Type.String({ minLength: 1, maxLength: 1000 }), { minItems: 1, maxItems: 4 }),
    ),
  ),
  top_p: Type.Optional(nullable(Type.Number({ minimum: 0, maximum: 1 }))),
  seed: Type.Optional(nullable(Type.Integer({ minimum: -(2 ** 53) + 1, maximum: 2 ** 53 - 1 }))),
  presence_penalty: Type.Optional(nullable(Type.Number({ minimum: -2, maximum: 2 }))),
  frequency_penalty: Type.Optional(nullable(Type.Number({ minimum: -2, maximum: 2 }))),
  logit_bias: Type.Optional(
    nullable(
      Type.Record(Type.String({ pattern: '^[0-9]{1,10}$' }), Type.Number({ minimum: -100, maximum: 100 }), {
        maxProperties: 300,
      }),
    ),
  ),
  user: Type.Optional(nullable(Type.String({ maxLength: 512 }))),
  n: Type.Optional(
    nullable(Type.Integer({ minimum: 1, maximum: 128, default: 1, description: 'above 1: only where the engine can' })),
  ),
};

export const ChatCompletionRequest = Type.Object(
  {
    model: modelId('chat'),
    messages: Type.Array(ChatMessage, { minItems: 1, maxItems: 2048 }),
    stream: Type.Optional(
      nullable(Type.Boolean({ default: false, description: 'Server-Sent Events in OpenAI chunk format' })),
    ),
    stream_options: Type.Optional(
      nullable(Type.Object({ include_usage: Type.Optional(nullable(Type.Boolean())) }, { additionalProperties: true })),
    ),
    temperature: Type.Optional(nullable(Type.Number({ minimum: 0, maximum: 2, default: 0.7 }))),
    max_tokens: Type.Optional(
      nullable(
        Type.Integer({ minimum: 1, maximum: 32_768, description: 'default: the model context length, at most 32768' }),
      ),
    ),
    max_completion_tokens: Type.Optional(
      nullable(
        Type.Integer({ minimum: 1, maximum: 32_768, description: 'the same as max_tokens (newer OpenAI clients)' }),
      ),
    ),
    knowledge_base: Type.Optional(
      nullable(
        Type.String({
          maxLength: 256,
          description:
            'knowledge base id (kb_...): the answer is grounded in its nearest chunks, returned in `sources`; needs knowledge_bases:read',
        }),
      ),
    ),
    knowledge_base_top_k: Type.Optional(
      nullable(
        Type.Integer({
          minimum: 1,
          maximum: 20,
          default: 4,
          description: 'how many chunks of the knowledge base go to the model',
        }),
      ),
    ),
    ...ChatSurface,
    ...Routing,
  },
  { $id: 'ChatCompletionRequest', additionalProperties: true },
);

export const SvcNode = Type.Object(
  {
    node_id: Type.String(),
    gpu_model: Type.Union([Type.String(), Type.Null()]),
    region: Type.Union([Type.String(), Type.Null()]),
    country: Type.Union([Type.String(), Type.Null()]),
  },
  { $id: 'SvcNode', description: 'the node that served the request' },
);

/** One retrieved chunk a grounded answer may cite (`[index]` in the answer). */
export const ChatSource = Type.Object(
  {
    index: Type.Integer({ description: 'the citation number: [1], [2], ...' }),
    document_id: Type.String(),
    document_name: Type.String(),
    chunk_id: Type.String(),
    chunk_index: Type.Integer({ description: "the chunk's position in its document, from 0" }),
    score: Type.Number({ description: 'cosine similarity to the question' }),
    sha256: Type.String({ description: 'SHA-256 of the chunk text (hex), as recorded in the receipt metadata' }),
    text: Type.String(),
  },
  { $id: 'ChatSource' },
);

const ChatUsage = Type.Object({
  prompt_tokens: Type.Integer(),
  completion_tokens: Type.Integer(),
  total_tokens: Type.Integer(),
});

export const ChatCompletion = Type.Object(
  {
    id: Type.String({ description: 'chatcmpl-<id>; also the receipt job_id' }),
    object: Type.Literal('chat.completion'),
    created: Type.Integer(),
    model: Type.String(),
    system_fingerprint: Type.Null(),
    choices: Type.Array(
      Type.Object({
        index: Type.Integer(),
        message: Type.Object({
          role: Type.Literal('assistant'),
          content: Type.Union([Type.String(), Type.Null()], { description: 'null when the answer is tool calls' }),
          tool_calls: Type.Optional(Type.Array(ToolCall)),
        }),
        logprobs: Type.Null(),
        finish_reason: Type.String(),
      }),
    ),
    usage: ChatUsage,
    svc_node: Type.Ref(SvcNode),
    svc_receipt_id: Type.String(),
    sources: Type.Optional(
      Type.Array(Type.Ref(ChatSource), {
        description: 'with knowledge_base: the chunks the answer was grounded in, cited as [index]',
      }),
    ),
  },
  { $id: 'ChatCompletion', additionalProperties: true },
);

export const EmbeddingsRequest = Type.Object(
  {
    model: modelId('embeddings'),
    input: Type.Union(
      [Type.String({ minLength: 1 }), Type.Array(Type.String({ minLength: 1 }), { minItems: 1, maxItems: 2048 })],
      {
        description: 'a text, or up to 2048 texts embedded in one request',
      },
    ),
    encoding_format: Type.Optional(nullable(StringEnum(['float', 'base64'] as const, { default: 'float' }))),
    dimensions: Type.Optional(
      nullable(
        Type.Integer({ minimum: 1, description: "must equal the model's dimensions (384 for all-MiniLM-L6-v2)" }),
      ),
    ),
    ...Routing,
  },
  { $id: 'EmbeddingsRequest', additionalProperties: true },
);

export const EmbeddingsResponse = Type.Object(
  {
    object: Type.Literal('list'),
    id: Type.String({ description: 'the request id, the receipt job_id' }),
    data: Type.Array(
      Type.Object({
        object: Type.Literal('embedding'),
        index: Type.Integer(),
        embedding: Type.Union([
          Type.Array(Type.Number()),
          Type.String({ description: 'base64 of little-endian float32 when encoding_format is base64' }),
        ]),
      }),
    ),
    model: Type.String(),
    usage: Type.Object({ prompt_tokens: Type.Integer(), total_tokens: Type.Integer() }),
    svc_node: Type.Ref(SvcNode),
    svc_receipt_id: Type.String(),
  },
  { $id: 'EmbeddingsResponse' },
);

export const TranscriptionForm = Type.Object(
  {
    file: Type.Unsafe<unknown>({
      type: 'string',
      format: 'binary',
      description: 'mp3, wav, m4a, flac or webm, recognised by content; at most 25 MiB',
    }),
    model: modelId('transcription'),
    language: Type.Optional(
      Type.String({ pattern: '^[a-z]{2,3}$', description: 'ISO 639-1 code; auto-detected when omitted' }),
    ),
    response_format: Type.Optional(StringEnum(['json', 'text', 'verbose_json'] as const, { default: 'json' })),
    strict_jurisdiction: Type.Optional(Country),
    jurisdiction: Type.Optional(Country),
    requires_tee: Type.Optional(Type.Boolean()),
  },
  { $id: 'TranscriptionRequest' },
);

export const TranscriptionResponse = Type.Object(
  {
    text: Type.String(),
    task: Type.Optional(Type.String()),
    language: Type.Optional(Type.String()),
    duration: Type.Optional(Type.Number()),
    segments: Type.Optional(
      Type.Array(Type.Object({ id: Type.Integer(), start: Type.Number(), end: Type.Number(), text: Type.String() })),
    ),
  },
  {
    $id: 'TranscriptionResponse',
    additionalProperties: true,
    description: '`{text}` for json; verbose_json adds language, duration, segments, svc_node and svc_receipt_id',
  },
);

export const ImageRequest = Type.Object(
  {
    model: modelId('image'),
    prompt: Type.String({ minLength: 1, maxLength: 4000 }),
    n: Type.Optional(nullable(Type.Integer({ minimum: 1, maximum: 10, default: 1 }))),
    size: Type.Optional(
      nullable(
        Type.String({
          pattern: '^[0-9]{1,5}x[0-9]{1,5}$',
          default: '1024x1024',
          description: 'WxH, each side 64..1024',
        }),
      ),
    ),
    response_format: Type.Optional(nullable(StringEnum(['url', 'b64_json'] as const, { default: 'url' }))),
    ...Routing,
  },
  { $id: 'ImageRequest', additionalProperties: true },
);

export const ImageResponse = Type.Object(
  {
    created: Type.Integer(),
    id: Type.String({ description: 'the request id, the receipt job_id' }),
    data: Type.Array(Type.Object({ url: Type.Optional(Type.String()), b64_json: Type.Optional(Type.String()) })),
    svc_node: Type.Ref(SvcNode),
    svc_receipt_id: Type.String(),
  },
  { $id: 'ImageResponse' },
);

import type { ChatField, ToolCallDeltaWire, ToolCallWire } from '@svc/protocol';

/**
 * What a node runs work on. An engine serves some catalogue models; the agent picks the engine
 * by the work's model. Engines turn their own failures into EngineError.
 */
export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  /** Null only on an assistant message that made tool calls. */
  content: string | null;
  tool_calls?: ToolCallWire[];
  tool_call_id?: string;
}

export interface ChatRequest {
  /** Catalogue id (`tinyllama`); the engine maps it to its own model name. */
  model: string;
  messages: ChatMessage[];
  max_tokens?: number;
  temperature?: number;
  /**
   * The request's fields beyond the plain ones (protocol `CHAT_FIELDS`: `tools`, `response_format`,
   * `stop`, `seed`, ...), as the buyer sent them. The gateway only sends an engine the fields it
   * declared in {@link Engine.chatFields}.
   */
  fields?: Readonly<Partial<Record<ChatField, unknown>>>;
}

export interface ChatUsage {
  prompt_tokens: number;
  completion_tokens: number;
}

export interface ChatResult {
  content: string;
  finish_reason: string;
  usage: ChatUsage;
  /** The calls the model made (`finish_reason` `tool_calls`). */
  tool_calls?: ToolCallWire[];
}

export interface EmbedRequest {
  model: string;
  input: string[];
}

export interface EmbedResult {
  embeddings: number[][];
  prompt_tokens: number;
}

export interface TranscribeRequest {
  model: string;
  audio: Buffer;
  filename: string;
  language?: string;
}

export interface TranscribeResult {
  text: string;
  language: string;
  duration: number;
  segments: { start: number; end: number; text: string }[];
}

export interface ImageRequest {
  model: string;
  prompt: string;
  n: number;
  size: string;
}

export interface ImageResult {
  /** PNG (or other image) bytes, one per image. */
  images: { bytes: Buffer; content_type: string }[];
}

export interface CallOptions {
  signal?: AbortSignal;
  /** Streaming chat: called with each piece of generated text, in order. */
  onDelta?: (text: string) => void;
  /** Streaming chat: called with each set of tool call fragments (OpenAI's `delta.tool_calls`), in order. */
  onToolCalls?: (calls: ToolCallDeltaWire[]) => void;
}

export interface Engine {
  /** `openai-upstream`, `llama-cpp`, ... */
  readonly name: string;
  /** Catalogue ids this engine serves. */
  models(): string[];
  /** The chat fields beyond the plain ones it honours for `model` (declared at registration); none when absent. */
  chatFields?(model: string): readonly ChatField[];
  chat(request: ChatRequest, options?: CallOptions): Promise<ChatResult>;
  embed(request: EmbedRequest, options?: CallOptions): Promise<EmbedResult>;
  transcribe(request: TranscribeRequest, options?: CallOptions): Promise<TranscribeResult>;
  generateImage(request: ImageRequest, options?: CallOptions): Promise<ImageResult>;
  close(): Promise<void>;
}

/** A failure of the engine or its upstream; `retryable` says whether another node might succeed. */
export class EngineError extends Error {
  override name = 'EngineError';
  constructor(
    message: string,
    readonly retryable: boolean,
    readonly status?: number,
  ) {
    super(message);
  }
}

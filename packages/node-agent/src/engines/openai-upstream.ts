import { CHAT_FIELDS, findModel, type ChatField, type ToolCallDeltaWire, type ToolCallWire } from '@svc/protocol';
import {
  type CallOptions,
  type ChatRequest,
  type ChatResult,
  type ChatUsage,
  type EmbedRequest,
  type EmbedResult,
  type Engine,
  EngineError,
  type ImageRequest,
  type ImageResult,
  type TranscribeRequest,
  type TranscribeResult,
} from './interface.js';
import { readSse } from './sse.js';
import { estimateChatPromptTokens, estimateInputTokens, estimateTokens } from './token-estimate.js';
import { createUpstreamHttp, readJson, type UpstreamStream } from './upstream-http.js';
import { audioDurationSeconds } from './audio-duration.js';

export interface OpenAIUpstreamOptions {
  /** The upstream's OpenAI base URL, `/v1` included: `http://127.0.0.1:11434/v1`. */
  baseUrl: string;
  /** Sent as `Authorization: Bearer <apiKey>` when set. */
  apiKey?: string;
  /** Catalogue id -> the upstream's model name (`tinyllama` -> `tinyllama:1.1b`). */
  models: ReadonlyMap<string, string>;
  /** Per call, body included; default 120000. */
  timeoutMs?: number;
  /** Injected for tests; default the global fetch. */
  fetch?: typeof fetch;
}

type Json = Record<string, unknown>;

function asObject(value: unknown): Json | undefined {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Json) : undefined;
}

function count(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : undefined;
}

function malformed(what: string): EngineError {
  return new EngineError(`upstream returned a malformed ${what} response`, true);
}

/** Reported usage when the upstream gives both counts, else the estimate of token-estimate.ts. */
function chatUsage(reported: unknown, request: ChatRequest, content: string): ChatUsage {
  const usage = asObject(reported);
  const prompt = count(usage?.prompt_tokens);
  const completion = count(usage?.completion_tokens);
  if (prompt !== undefined && completion !== undefined) return { prompt_tokens: prompt, completion_tokens: completion };
  return { prompt_tokens: estimateChatPromptTokens(request.messages), completion_tokens: estimateTokens(content) };
}

/**
 * What an upstream is sent of the chat surface: every field but `n` above 1 (the node's result
 * holds one choice). The upstream server decides for itself what it does with them.
 */
const UPSTREAM_CHAT_FIELDS: readonly ChatField[] = CHAT_FIELDS.filter((f) => f !== 'n');

/** The tool calls of an answer message, or undefined when there are none; malformed ones throw. */
function toolCallsOf(value: unknown): ToolCallWire[] | undefined {
  if (value === undefined || value === null) return undefined;
  if (!Array.isArray(value)) throw malformed('chat');
  const calls = value.map((v): ToolCallWire => {
    const call = asObject(v);
    const fn = asObject(call?.function);
    if (typeof call?.id !== 'string' || typeof fn?.name !== 'string' || typeof fn.arguments !== 'string')
      throw malformed('chat');
    return { id: call.id, type: 'function', function: { name: fn.name, arguments: fn.arguments } };
  });
  return calls.length === 0 ? undefined : calls;
}

/**
 * Tool call fragments of a streamed chunk (`delta.tool_calls`), normalized to the protocol's
 * shape and added to `calls` (by `index`), or undefined when the chunk has none.
 */
function addToolCallDeltas(value: unknown, calls: ToolCallWire[]): ToolCallDeltaWire[] | undefined {
  if (!Array.isArray(value) || value.length === 0) return undefined;
  return value.map((v, i): ToolCallDeltaWire => {
    const delta = asObject(v);
    const fn = asObject(delta?.function);
    const index = count(delta?.index) ?? i;
    if (index > 127) throw malformed('chat stream');
    const call = (calls[index] ??= { id: '', type: 'function', function: { name: '', arguments: '' } });
    const out: ToolCallDeltaWire = { index };
    if (typeof delta?.id === 'string') {
      call.id = delta.id;
      out.id = delta.id;
      out.type = 'function';
    }
    if (fn !== undefined) {
      out.function = {};
      if (typeof fn.name === 'string') call.function.name += out.function.name = fn.name;
      if (typeof fn.arguments === 'string') call.function.arguments += out.function.arguments = fn.arguments;
    }
    return out;
  });
}

const AUDIO_TYPES: Record<string, string> = {
  wav: 'audio/wav',
  mp3: 'audio/mpeg',
  m4a: 'audio/mp4',
  flac: 'audio/flac',
  webm: 'audio/webm',
  ogg: 'audio/ogg',
};

function audioType(filename: string): string {
  const ext = filename.slice(filename.lastIndexOf('.') + 1).toLowerCase();
  return AUDIO_TYPES[ext] ?? 'application/octet-stream';
}

/** The image type from its first bytes (PNG, JPEG, WebP, GIF). */
export function sniffImageType(bytes: Buffer): string {
  if (bytes.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))) return 'image/png';
  if (bytes[0] === 0xff && bytes[1] === 0xd8 && bytes[2] === 0xff) return 'image/jpeg';
  if (bytes.toString('latin1', 0, 4) === 'RIFF' && bytes.toString('latin1', 8, 12) === 'WEBP') return 'image/webp';
  if (bytes.toString('latin1', 0, 4) === 'GIF8') return 'image/gif';
  return 'application/octet-stream';
}

/**
 * An Engine in front of any OpenAI-compatible server (Ollama, vLLM, llama.cpp server, LocalAI,
 * whisper and image servers): `/chat/completions` (SSE when `options.onDelta` is given),
 * `/embeddings`, `/audio/transcriptions`, `/images/generations`. Failures become EngineError:
 * network errors, timeouts, 5xx and 429 retryable; a 4xx other than 401/403/404/408/429 final
 * with the upstream's message. Usage the upstream does not report is estimated.
 *
 * @example
 * const engine = createOpenAIUpstreamEngine({
 *   baseUrl: 'http://127.0.0.1:11434/v1',
 *   models: new Map([['tinyllama', 'tinyllama']]),
 * });
 * const { content } = await engine.chat({ model: 'tinyllama', messages: [{ role: 'user', content: 'hi' }] });
 */
export function createOpenAIUpstreamEngine(options: OpenAIUpstreamOptions): Engine {
  const timeoutMs = options.timeoutMs ?? 120_000;
  const http = createUpstreamHttp({
    baseUrl: options.baseUrl,
    timeoutMs,
    ...(options.fetch === undefined ? {} : { fetch: options.fetch }),
    ...(options.apiKey === undefined ? {} : { apiKey: options.apiKey }),
  });

  function upstreamModel(model: string): string {
    const name = options.models.get(model);
    // Another node may serve it: this one was asked for a model it does not advertise.
    if (name === undefined) throw new EngineError(`model ${model} is not served by this engine`, true);
    return name;
  }

  async function streamChat(upstream: UpstreamStream, request: ChatRequest, call: CallOptions): Promise<ChatResult> {
    let content = '';
    const calls: ToolCallWire[] = [];
    let finishReason: string | undefined;
    let usage: unknown;
    let done = false;
    try {
      await readSse(upstream.read, ({ data }) => {
        if (data === '[DONE]') {
          done = true;
          return false;
        }
        let chunk: Json | undefined;
        try {
          chunk = asObject(JSON.parse(data));
        } catch {
          throw malformed('chat stream');
        }
        if (chunk === undefined) throw malformed('chat stream');
        if (chunk.error !== undefined) {
          const error = asObject(chunk.error);
          const message = typeof error?.message === 'string' ? error.message : JSON.stringify(chunk.error);
          throw new EngineError(`upstream stream error: ${message}`, true);
        }
        if (chunk.usage !== undefined && chunk.usage !== null) usage = chunk.usage;
        const choice = Array.isArray(chunk.choices) ? asObject(chunk.choices[0]) : undefined;
        const delta = asObject(choice?.delta);
        const text = delta?.content;
        if (typeof text === 'string' && text !== '') {
          content += text;
          call.onDelta?.(text);
        }
        const fragments = addToolCallDeltas(delta?.tool_calls, calls);
        if (fragments !== undefined) call.onToolCalls?.(fragments);
        if (typeof choice?.finish_reason === 'string') finishReason = choice.finish_reason;
      });
    } catch (error) {
      throw upstream.fail(error, 'upstream connection lost mid-stream');
    }
    // Servers that never send [DONE] still end with a finish_reason; without either the
    // connection was cut.
    if (!done && finishReason === undefined) {
      throw new EngineError('upstream connection lost mid-stream: the stream ended before [DONE]', true);
    }
    const toolCalls = calls.filter((c) => c !== undefined);
    return {
      content,
      finish_reason: finishReason ?? 'stop',
      usage: chatUsage(usage, request, content + toolCalls.map((c) => c.function.arguments).join('')),
      ...(toolCalls.length === 0 ? {} : { tool_calls: toolCalls }),
    };
  }

  return {
    name: 'openai-upstream',

    models() {
      return [...options.models.keys()];
    },

    chatFields: () => UPSTREAM_CHAT_FIELDS,

    async chat(request, call: CallOptions = {}) {
      // The buyer's fields go first, so that none can replace what the agent itself decides.
      const body: Json = { ...request.fields, model: upstreamModel(request.model), messages: request.messages };
      if (request.max_tokens !== undefined) body.max_tokens = request.max_tokens;
      if (request.temperature !== undefined) body.temperature = request.temperature;
      if (call.onDelta !== undefined || call.onToolCalls !== undefined) {
        body.stream = true;
        body.stream_options = { include_usage: true };
        return streamChat(await http.postStream('/chat/completions', body, call), request, call);
      }
      const json = asObject(await http.postJson('/chat/completions', body, call));
      const choice = Array.isArray(json?.choices) ? asObject(json.choices[0]) : undefined;
      const message = asObject(choice?.message);
      const toolCalls = toolCallsOf(message?.tool_calls);
      const content = message?.content ?? (toolCalls ? '' : undefined);
      if (typeof content !== 'string') throw malformed('chat');
      const finishReason = typeof choice?.finish_reason === 'string' ? choice.finish_reason : 'stop';
      const generated = toolCalls ? content + toolCalls.map((c) => c.function.arguments).join('') : content;
      return {
        content,
        finish_reason: finishReason,
        usage: chatUsage(json?.usage, request, generated),
        ...(toolCalls ? { tool_calls: toolCalls } : {}),
      };
    },

    async embed(request: EmbedRequest, call: CallOptions = {}): Promise<EmbedResult> {
      const body = { model: upstreamModel(request.model), input: request.input, encoding_format: 'float' };
      const json = asObject(await http.postJson('/embeddings', body, call));
      const data = Array.isArray(json?.data) ? json.data.map(asObject) : [];
      if (data.length !== request.input.length) throw malformed('embeddings');
      const ordered = data.every((item) => count(item?.index) !== undefined)
        ? [...data].sort((a, b) => Number(a?.index) - Number(b?.index))
        : data;
      const dimensions = findModel(request.model)?.dimensions;
      const embeddings = ordered.map((item) => {
        const vector = item?.embedding;
        if (!Array.isArray(vector) || !vector.every((x) => typeof x === 'number')) throw malformed('embeddings');
        if (dimensions !== undefined && vector.length !== dimensions) {
          throw new EngineError(
            `upstream embedding has ${vector.length} dimensions; ${request.model} has ${dimensions}`,
            false,
          );
        }
        return vector as number[];
      });
      const reported = count(asObject(json?.usage)?.prompt_tokens);
      return { embeddings, prompt_tokens: reported ?? estimateInputTokens(request.input) };
    },

    async transcribe(request: TranscribeRequest, call: CallOptions = {}): Promise<TranscribeResult> {
      const form = new FormData();
      form.set('file', new Blob([request.audio], { type: audioType(request.filename) }), request.filename);
      form.set('model', upstreamModel(request.model));
      form.set('response_format', 'verbose_json');
      if (request.language !== undefined) form.set('language', request.language);
      const upstream = await http.post('/audio/transcriptions', { form }, call);
      const isJson = (upstream.response.headers.get('content-type') ?? '').includes('json');
      let json: Json | undefined;
      if (isJson) {
        json = asObject(await readJson(upstream));
      } else {
        try {
          json = { text: (await upstream.response.text()).trim() };
        } catch (error) {
          throw upstream.fail(error, 'reading the upstream response failed');
        } finally {
          upstream.end();
        }
      }
      if (typeof json?.text !== 'string') throw malformed('transcription');
      const text = json.text;
      const duration =
        typeof json.duration === 'number' && json.duration >= 0
          ? json.duration
          : ((await audioDurationSeconds(request.audio)) ?? 0);
      const segments = Array.isArray(json.segments)
        ? json.segments
            .map(asObject)
            .flatMap((s) =>
              typeof s?.start === 'number' && typeof s.end === 'number' && typeof s.text === 'string'
                ? [{ start: s.start, end: s.end, text: s.text }]
                : [],
            )
        : text.trim() === ''
          ? []
          : [{ start: 0, end: duration, text }];
      const language = typeof json.language === 'string' ? json.language : (request.language ?? 'unknown');
      return { text, language, duration, segments };
    },

    async generateImage(request: ImageRequest, call: CallOptions = {}): Promise<ImageResult> {
      const body = {
        model: upstreamModel(request.model),
        prompt: request.prompt,
        n: request.n,
        size: request.size,
        response_format: 'b64_json',
      };
      const json = asObject(await http.postJson('/images/generations', body, call));
      const data = Array.isArray(json?.data) ? json.data.map(asObject) : [];
      if (data.length === 0) throw malformed('image');
      const images = await Promise.all(
        data.map(async (item) => {
          let bytes: Buffer;
          if (typeof item?.b64_json === 'string') {
            bytes = Buffer.from(item.b64_json, 'base64');
          } else if (typeof item?.url === 'string') {
            const upstream = await http.get(item.url, call);
            try {
              bytes = Buffer.from(await upstream.response.arrayBuffer());
            } catch (error) {
              throw upstream.fail(error, 'downloading the upstream image failed');
            } finally {
              upstream.end();
            }
          } else {
            throw malformed('image');
          }
          if (bytes.length === 0) throw malformed('image');
          return { bytes, content_type: sniffImageType(bytes) };
        }),
      );
      return { images };
    },

    async close() {
      http.close();
    },
  };
}

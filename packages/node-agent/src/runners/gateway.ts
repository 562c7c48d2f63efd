import { CHAT_FIELDS, type ChatField } from '@svc/protocol';
import { EngineError, type ChatMessage, type ChatRequest, type Engine } from '../engines/interface.js';
import type { WorkItem } from '../wire.js';
import {
  engineFor,
  jsonOutput,
  meterCount,
  optionalNumber,
  workModel,
  WorkError,
  type RunContext,
  type RunOutput,
} from './types.js';

/** Refusal for `stream: true` work when the runner has nowhere to send events. */
export const STREAMING_UNSUPPORTED = 'streaming work is not supported by this agent version';

const ROLES = new Set(['system', 'user', 'assistant', 'tool']);
const MESSAGES_SHAPE =
  'payload.messages must be a non-empty array of {role: system|user|assistant|tool, content: string (null with tool_calls), tool_calls?, tool_call_id?}';

function chatMessages(value: unknown): ChatMessage[] {
  if (!Array.isArray(value) || value.length === 0) throw new WorkError(MESSAGES_SHAPE, false);
  return value.map((v: unknown): ChatMessage => {
    const m = (typeof v === 'object' && v !== null ? v : {}) as Record<string, unknown>;
    const role = String(m.role);
    const calls = Array.isArray(m.tool_calls) ? (m.tool_calls as ChatMessage['tool_calls']) : undefined;
    if (!ROLES.has(role) || !(typeof m.content === 'string' || (m.content === null && calls)))
      throw new WorkError(MESSAGES_SHAPE, false);
    return {
      role: role as ChatMessage['role'],
      content: m.content as string | null,
      ...(calls ? { tool_calls: calls } : {}),
      ...(typeof m.tool_call_id === 'string' ? { tool_call_id: m.tool_call_id } : {}),
    };
  });
}

/**
 * The payload's chat fields beyond the plain ones, for the engine; one the engine does not honour
 * fails the work (retryable: another node's engine may), never reaches it dropped.
 */
function chatFields(payload: Record<string, unknown>, engine: Engine, model: string): ChatRequest['fields'] {
  let fields: Partial<Record<ChatField, unknown>> | undefined;
  for (const field of CHAT_FIELDS) {
    const value = payload[field];
    if (value === undefined || value === null) continue;
    if (field === 'n' && value === 1) continue;
    if (!(engine.chatFields?.(model) ?? []).includes(field))
      throw new WorkError(`${field} is not supported by the ${engine.name} engine of this node`, true);
    (fields ??= {})[field] = value;
  }
  return fields;
}

/**
 * Gateway `chat` work: payload `{model, messages, max_tokens?, temperature?, stream?}` and the
 * chat fields beyond them the engine honours (`tools`, `response_format`, `stop`, ...). Output
 * `{content, finish_reason, usage, tool_calls?}`; units are prompt plus completion tokens. Streamed work
 * (`stream: true`) sends each piece of text to `ctx.events` as the engine makes it, then a
 * `done` event with the usage, and still returns the whole text as the result (which is what
 * the receipt signs); a failure mid-stream sends an `error` event first.
 *
 * @example
 * const out = await runGatewayChat(item, ctx);
 */
export async function runGatewayChat(item: WorkItem, ctx: RunContext): Promise<RunOutput> {
  const streamed = item.stream || item.payload.stream === true;
  const events = ctx.events;
  if (streamed && events === undefined) throw new WorkError(STREAMING_UNSUPPORTED, false);
  const model = workModel(item);
  const engine = engineFor(ctx.engines, model);
  const max_tokens = optionalNumber(item.payload.max_tokens, 'max_tokens');
  const temperature = optionalNumber(item.payload.temperature, 'temperature');
  const fields = chatFields(item.payload, engine, model ?? '');
  const request: ChatRequest = {
    model: model ?? '',
    messages: chatMessages(item.payload.messages),
    ...(max_tokens === undefined ? {} : { max_tokens }),
    ...(temperature === undefined ? {} : { temperature }),
    ...(fields === undefined ? {} : { fields }),
  };
  let answer;
  if (streamed && events !== undefined) {
    try {
      answer = await engine.chat(request, {
        signal: ctx.signal,
        onDelta: (text) => events.delta(text),
        onToolCalls: (calls) => events.toolCalls?.(calls),
      });
    } catch (err) {
      if (!ctx.signal.aborted) {
        const retryable = err instanceof EngineError || err instanceof WorkError ? err.retryable : true;
        await events.error(err instanceof Error ? err.message : String(err), retryable);
      }
      throw err;
    }
  } else {
    answer = await engine.chat(request, { signal: ctx.signal });
  }
  const usage = {
    prompt_tokens: meterCount(answer.usage.prompt_tokens),
    completion_tokens: meterCount(answer.usage.completion_tokens),
  };
  if (streamed && events !== undefined) await events.done({ usage, finish_reason: answer.finish_reason });
  const output = {
    content: answer.content,
    finish_reason: answer.finish_reason,
    usage,
    // In the signed result: the receipt's hash covers the calls.
    ...(answer.tool_calls ? { tool_calls: answer.tool_calls } : {}),
  };
  return jsonOutput(output, {
    metering_units: usage.prompt_tokens + usage.completion_tokens,
    usage,
    engine: engine.name,
  });
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
  if (answer.embeddings.length !== input.length) {
    throw new WorkError(
      `engine ${engine.name} returned ${answer.embeddings.length} embeddings for ${input.length} inputs`,
      true,
    );
  }
  const tokens = meterCount(answer.prompt_tokens);
  const output = {
    data: answer.embeddings.map((embedding, index) => ({ index, embedding })),
    usage: { prompt_tokens: tokens },
  };
  return jsonOutput(output, { metering_units: tokens, usage: { prompt_tokens: tokens }, engine: engine.name });
}

/** Audio the gateway sends inline, base64 (25 MiB of audio at most). */
const MAX_AUDIO_BASE64 = Math.ceil((25 * 1024 * 1024) / 3) * 4;

/**
 * Gateway `transcription` work: payload `{model, audio_base64, filename, language?}`. Output
 * `{text, language, duration, segments}`; units are `ceil(duration)` audio seconds, the
 * duration the engine measured.
 *
 * @example
 * const out = await runGatewayTranscription(item, ctx);
 */
export async function runGatewayTranscription(item: WorkItem, ctx: RunContext): Promise<RunOutput> {
  if (item.stream) throw new WorkError(STREAMING_UNSUPPORTED, false);
  const model = workModel(item);
  const engine = engineFor(ctx.engines, model);
  const encoded = item.payload.audio_base64;
  if (typeof encoded !== 'string' || encoded.length === 0 || encoded.length > MAX_AUDIO_BASE64)
    throw new WorkError('payload.audio_base64 must be the audio, base64, at most 25 MiB', false);
  const audio = Buffer.from(encoded, 'base64');
  const named = typeof item.payload.filename === 'string' ? item.payload.filename : 'audio';
  const filename = /^[A-Za-z0-9._-]{1,100}$/.test(named) ? named : 'audio';
  const language = typeof item.payload.language === 'string' ? item.payload.language : undefined;
  const answer = await engine.transcribe(
    { model: model ?? '', audio, filename, ...(language ? { language } : {}) },
    { signal: ctx.signal },
  );
  const seconds = Number.isFinite(answer.duration) && answer.duration > 0 ? Math.ceil(answer.duration) : 0;
  const output = { text: answer.text, language: answer.language, duration: answer.duration, segments: answer.segments };
  return jsonOutput(output, { metering_units: seconds, usage: { audio_seconds: seconds }, engine: engine.name });
}

/**
 * Gateway `image` work: payload `{model, prompt, n, size}`. Output `{images: [{content_type,
 * b64_json}]}`; units are the images made.
 *
 * @example
 * const out = await runGatewayImage(item, ctx);
 */
export async function runGatewayImage(item: WorkItem, ctx: RunContext): Promise<RunOutput> {
  if (item.stream) throw new WorkError(STREAMING_UNSUPPORTED, false);
  const model = workModel(item);
  const engine = engineFor(ctx.engines, model);
  const prompt = item.payload.prompt;
  if (typeof prompt !== 'string' || prompt === '')
    throw new WorkError('payload.prompt must be a non-empty string', false);
  const n = optionalNumber(item.payload.n, 'n') ?? 1;
  if (!Number.isInteger(n) || n < 1 || n > 10) throw new WorkError('payload.n must be an integer from 1 to 10', false);
  const size = item.payload.size ?? '1024x1024';
  if (typeof size !== 'string' || !/^\d{2,4}x\d{2,4}$/.test(size))
    throw new WorkError('payload.size must be WxH, e.g. 512x512', false);
  const answer = await engine.generateImage({ model: model ?? '', prompt, n, size }, { signal: ctx.signal });
  const images = answer.images.map((image) => ({
    content_type: image.content_type,
    b64_json: image.bytes.toString('base64'),
  }));
  return jsonOutput(
    { images },
    { metering_units: images.length, usage: { images: images.length }, engine: engine.name },
  );
}

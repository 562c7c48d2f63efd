import { abortReason } from '../backoff.js';
import type { WorkItem } from '../wire.js';
import { fetchPayload } from './fetch-payload.js';
import {
  engineFor,
  jsonOutput,
  meterCount,
  optionalNumber,
  stringList,
  workModel,
  WorkError,
  type RunContext,
  type RunOutput,
} from './types.js';

/**
 * Kind 1 `llm_inference`: one chat completion per `payload.inputs[i]`, each a single user
 * message. Output `{results: [{index, content, finish_reason, usage}]}`; units are prompt plus
 * completion tokens over all inputs.
 *
 * @example
 * const out = await runLlmInference(item, ctx); // out.metering_units === total tokens
 */
export async function runLlmInference(item: WorkItem, ctx: RunContext): Promise<RunOutput> {
  const model = workModel(item);
  const engine = engineFor(ctx.engines, model);
  const inputs = stringList(item.payload.inputs, 'inputs');
  const max_tokens = optionalNumber(item.payload.max_tokens, 'max_tokens');
  const temperature = optionalNumber(item.payload.temperature, 'temperature');
  const results = [];
  let prompt = 0;
  let completion = 0;
  for (const [index, content] of inputs.entries()) {
    if (ctx.signal.aborted) throw abortReason(ctx.signal);
    const request = {
      model: model ?? '',
      messages: [{ role: 'user' as const, content }],
      ...(max_tokens === undefined ? {} : { max_tokens }),
      ...(temperature === undefined ? {} : { temperature }),
    };
    const answer = await engine.chat(request, { signal: ctx.signal });
    const usage = {
      prompt_tokens: meterCount(answer.usage.prompt_tokens),
      completion_tokens: meterCount(answer.usage.completion_tokens),
    };
    prompt += usage.prompt_tokens;
    completion += usage.completion_tokens;
    results.push({ index, content: answer.content, finish_reason: answer.finish_reason, usage });
  }
  const usage = { prompt_tokens: prompt, completion_tokens: completion };
  return jsonOutput({ results }, { metering_units: prompt + completion, usage, engine: engine.name });
}

/**
 * Kind 2 `embeddings`: one `embed` call over all inputs. Output `{data: [{index, embedding}]}`;
 * units are the input tokens.
 *
 * @example
 * const out = await runEmbeddings(item, ctx);
 */
export async function runEmbeddings(item: WorkItem, ctx: RunContext): Promise<RunOutput> {
  const model = workModel(item);
  const engine = engineFor(ctx.engines, model);
  const inputs = stringList(item.payload.inputs, 'inputs');
  const answer = await engine.embed({ model: model ?? '', input: inputs }, { signal: ctx.signal });
  if (answer.embeddings.length !== inputs.length) {
    throw new WorkError(
      `engine ${engine.name} returned ${answer.embeddings.length} embeddings for ${inputs.length} inputs`,
      true,
    );
  }
  const data = answer.embeddings.map((embedding, index) => ({ index, embedding }));
  const tokens = meterCount(answer.prompt_tokens);
  return jsonOutput({ data }, { metering_units: tokens, usage: { prompt_tokens: tokens }, engine: engine.name });
}

/**
 * Kind 3 `transcription`: downloads `payload.payload_url` (60 s, 25 MiB) and transcribes it.
 * Output `{text, language, duration, segments}`; units are `ceil(duration)` audio seconds.
 *
 * @example
 * const out = await runTranscription(item, ctx);
 */
export async function runTranscription(item: WorkItem, ctx: RunContext): Promise<RunOutput> {
  const model = workModel(item);
  const engine = engineFor(ctx.engines, model);
  const url = item.payload.payload_url;
  const audio = await fetchPayload(url, {
    signal: ctx.signal,
    ...(ctx.fetch ? { fetch: ctx.fetch } : {}),
    ...(ctx.trustedOrigin ? { trustedOrigin: ctx.trustedOrigin } : {}),
  });
  const filename = (typeof url === 'string' ? new URL(url).pathname.split('/').pop() : undefined) || 'audio';
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
 * Kind 4 `image_generation`: one `generateImage` per prompt. Output
 * `{results: [{index, images: [{content_type, b64_json}]}]}`; units are the images made.
 *
 * @example
 * const out = await runImageGeneration(item, ctx);
 */
export async function runImageGeneration(item: WorkItem, ctx: RunContext): Promise<RunOutput> {
  const model = workModel(item);
  const engine = engineFor(ctx.engines, model);
  const prompts = stringList(item.payload.prompts, 'prompts');
  const size = item.payload.size ?? '512x512';
  if (typeof size !== 'string' || !/^\d{2,4}x\d{2,4}$/.test(size))
    throw new WorkError('payload.size must be WxH, e.g. 512x512', false);
  const results = [];
  let images = 0;
  for (const [index, prompt] of prompts.entries()) {
    if (ctx.signal.aborted) throw abortReason(ctx.signal);
    const answer = await engine.generateImage({ model: model ?? '', prompt, n: 1, size }, { signal: ctx.signal });
    images += answer.images.length;
    results.push({
      index,
      images: answer.images.map((image) => ({
        content_type: image.content_type,
        b64_json: image.bytes.toString('base64'),
      })),
    });
  }
  return jsonOutput({ results }, { metering_units: images, usage: { images }, engine: engine.name });
}

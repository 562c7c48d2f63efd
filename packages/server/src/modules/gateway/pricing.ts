import { findModel, microToCents, usageCostMicro, type ModelUsage } from '@svc/protocol';

/**
 * What gateway requests cost (DESIGN.md sections 7 and 10), as pure functions. Prices come from
 * the catalogue (`usageCostMicro`); this file decides the bound a request holds before it is
 * dispatched and the usage it is charged once it ends.
 */

/** Gateway request types, which are also the node work types. */
export type GatewayType = 'chat' | 'embeddings' | 'transcription' | 'image';

/**
 * The node agent's token estimate (docs/engines.md): ceil(UTF-8 bytes / 4), at least 1 for a
 * non-empty text. Used where no engine counted: a stream cut short, a client gone mid-stream.
 *
 * @example
 * estimateTokens('hello world'); // 3
 */
export function estimateTokens(text: string): number {
  if (text.length === 0) return 0;
  return Math.max(1, Math.ceil(Buffer.byteLength(text, 'utf8') / 4));
}

/** The prompt's token bound holds are taken on (@svc/protocol, shared with the receipt's metering bound). */
export { promptTokenBound } from '@svc/protocol';

/** Audio the hold assumes per byte of a compressed file we cannot read: 16 kbit/s. */
const MIN_AUDIO_BYTES_PER_SECOND = 2_000;

/**
 * An upper bound of an audio file's length in seconds: its WAV header when it has one, else
 * its size at 16 kbit/s (lower than any speech codec setting in use).
 *
 * @example
 * audioSecondsBound(wavOf2500ms); // 3
 */
export function audioSecondsBound(bytes: Buffer): number {
  const wav = wavSeconds(bytes);
  if (wav !== undefined) return Math.max(1, Math.ceil(wav));
  return Math.max(1, Math.ceil(bytes.length / MIN_AUDIO_BYTES_PER_SECOND));
}

function wavSeconds(buf: Buffer): number | undefined {
  if (buf.length < 12 || buf.toString('latin1', 0, 4) !== 'RIFF' || buf.toString('latin1', 8, 12) !== 'WAVE')
    return undefined;
  let byteRate: number | undefined;
  for (let offset = 12; offset + 8 <= buf.length;) {
    const id = buf.toString('latin1', offset, offset + 4);
    const size = buf.readUInt32LE(offset + 4);
    if (id === 'fmt ' && offset + 24 <= buf.length) byteRate = buf.readUInt32LE(offset + 16);
    if (id === 'data') return byteRate ? Math.min(size, buf.length - offset - 8) / byteRate : undefined;
    offset += 8 + size + (size % 2);
  }
  return undefined;
}

/**
 * The cents a request holds: its maximum cost rounded up, plus one cent for the account's
 * sub-cent carry, so that settling never meets the cap while usage stays within the bound.
 *
 * @example
 * holdCents(12_345); // 3
 */
export function holdCents(maxMicro: number): number {
  return microToCents(maxMicro, 'up') + 1;
}

/** The maximum cost of a request in micro-CAD, from its bound usage. */
export function maxCostMicro(model: string, bound: ModelUsage): number {
  return usageCostMicro(model, bound);
}

/**
 * The usage a receipt's signed `metering_units` stands for. Chat splits the units into prompt
 * and completion tokens with the node's reported usage (never more than the signed total);
 * embeddings are prompt tokens, transcription audio seconds, images images.
 *
 * @example
 * usageFromUnits('chat', 30, { prompt_tokens: 10, completion_tokens: 20 }); // { prompt_tokens: 10, completion_tokens: 20 }
 */
export function usageFromUnits(type: GatewayType, units: number, reported: Record<string, unknown> | null): ModelUsage {
  switch (type) {
    case 'chat': {
      const prompt =
        typeof reported?.prompt_tokens === 'number' && Number.isSafeInteger(reported.prompt_tokens)
          ? Math.max(0, Math.min(units, reported.prompt_tokens))
          : 0;
      return { prompt_tokens: prompt, completion_tokens: units - prompt };
    }
    case 'embeddings':
      return { prompt_tokens: units };
    case 'transcription':
      return { audio_seconds: units };
    case 'image':
      return { images: units };
  }
}

/** The cost in micro-CAD of a usage; 0 for a model that is not in the catalogue. */
export function costMicro(model: string, usage: ModelUsage): number {
  return findModel(model) ? usageCostMicro(model, usage) : 0;
}

import { ProtocolError } from './errors.js';

/** What a catalogue model does, and so which gateway endpoint serves it. */
export type ModelType = 'chat' | 'embeddings' | 'transcription' | 'image';
/** The unit a model's price is quoted in. */
export type ModelPriceUnit = '1k_tokens' | 'audio_second' | 'image';

/**
 * A model's price in integer micro-CAD per `unit`. For chat models `micro_cad_per_unit` is the
 * prompt price and `completion_micro_cad_per_unit` the completion price.
 */
export interface ModelPrice {
  readonly unit: ModelPriceUnit;
  readonly micro_cad_per_unit: number;
  readonly completion_micro_cad_per_unit?: number;
}

/** One entry of `GET /v1/models` plus what routing and billing need. */
export interface CatalogueModel {
  readonly id: string;
  readonly type: ModelType;
  readonly owned_by: 'svc';
  /** Unix seconds; fixed so that the listing is stable. */
  readonly created: number;
  readonly context_length?: number;
  readonly dimensions?: number;
  readonly price: ModelPrice;
}

const CREATED = 1_735_689_600; // 2025-01-01T00:00:00Z

function entry(
  id: string,
  type: ModelType,
  price: ModelPrice,
  extra: { context_length?: number; dimensions?: number } = {},
): CatalogueModel {
  return Object.freeze({ id, type, owned_by: 'svc', created: CREATED, ...extra, price: Object.freeze(price) });
}

function chat(id: string, context_length: number, prompt: number, completion: number): CatalogueModel {
  const price: ModelPrice = {
    unit: '1k_tokens',
    micro_cad_per_unit: prompt,
    completion_micro_cad_per_unit: completion,
  };
  return entry(id, 'chat', price, { context_length });
}

/**
 * The model catalogue, in listing order. Token prices are per 1,000 tokens (phi-4: 0.60 CAD per
 * million prompt tokens); whisper-base is 0.006 CAD per minute billed per second; sdxl-turbo
 * is 0.03 CAD per image.
 */
export const MODELS: readonly CatalogueModel[] = Object.freeze([
  chat('phi-4', 16_384, 600, 1_200),
  chat('svc-llama-3.2-3b', 131_072, 200, 400),
  chat('tinyllama', 2_048, 50, 100),
  entry(
    'all-MiniLM-L6-v2',
    'embeddings',
    { unit: '1k_tokens', micro_cad_per_unit: 20 },
    {
      context_length: 256,
      dimensions: 384,
    },
  ),
  entry(
    'nomic-embed-text',
    'embeddings',
    { unit: '1k_tokens', micro_cad_per_unit: 40 },
    {
      context_length: 8_192,
      dimensions: 768,
    },
  ),
  entry('whisper-base', 'transcription', { unit: 'audio_second', micro_cad_per_unit: 100 }),
  entry('sdxl-turbo', 'image', { unit: 'image', micro_cad_per_unit: 30_000 }),
]);

/**
 * The catalogue model with this id, or `undefined`.
 *
 * @example
 * findModel('all-MiniLM-L6-v2')?.dimensions; // 384
 */
export function findModel(id: string): CatalogueModel | undefined {
  return MODELS.find((model) => model.id === id);
}

/**
 * The catalogue models of one type, in listing order.
 *
 * @example
 * modelsOfType('embeddings').map((m) => m.id); // ['all-MiniLM-L6-v2', 'nomic-embed-text']
 */
export function modelsOfType(type: ModelType): CatalogueModel[] {
  return MODELS.filter((model) => model.type === type);
}

/** Metered usage of one gateway request. Absent counts are zero. */
export interface ModelUsage {
  prompt_tokens?: number;
  completion_tokens?: number;
  /** Whole seconds of audio; round a duration up before passing it. */
  audio_seconds?: number;
  images?: number;
}

/**
 * The exact cost in micro-CAD of a request's usage, rounded up to a whole micro-CAD (token
 * prices are per 1,000 tokens). Throws {@link ProtocolError} on an unknown model or a count
 * that is not a non-negative integer.
 *
 * @example
 * usageCostMicro('phi-4', { prompt_tokens: 1_000, completion_tokens: 500 }); // 600 + 600 = 1_200
 */
export function usageCostMicro(modelId: string, usage: ModelUsage): number {
  const model = findModel(modelId);
  if (model === undefined) throw new ProtocolError(`unknown model ${modelId}`, '/model');
  const count = (field: keyof ModelUsage): bigint => {
    const value = usage[field] ?? 0;
    if (!Number.isSafeInteger(value) || value < 0) {
      throw new ProtocolError(`${field} must be a non-negative integer`, `/usage/${field}`);
    }
    return BigInt(value);
  };
  const { price } = model;
  const unitPrice = BigInt(price.micro_cad_per_unit);
  let micro: bigint;
  if (price.unit === '1k_tokens') {
    const completion = BigInt(price.completion_micro_cad_per_unit ?? price.micro_cad_per_unit);
    const scaled = count('prompt_tokens') * unitPrice + count('completion_tokens') * completion;
    micro = (scaled + 999n) / 1_000n;
  } else {
    micro = count(price.unit === 'image' ? 'images' : 'audio_seconds') * unitPrice;
  }
  if (micro > BigInt(Number.MAX_SAFE_INTEGER)) throw new ProtocolError('usage is too large', '/usage');
  return Number(micro);
}

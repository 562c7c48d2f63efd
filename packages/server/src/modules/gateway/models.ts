import { MODELS } from '@svc/protocol';

/**
 * `GET /v1/models`: the catalogue in OpenAI's list shape, with the type, context length and
 * dimensions beside OpenAI's fields.
 *
 * @example
 * listModels().data.map((m) => m.id); // ['phi-4', 'svc-llama-3.2-3b', 'tinyllama', ...]
 */
export function listModels() {
  return {
    object: 'list' as const,
    data: MODELS.map((m) => ({
      id: m.id,
      object: 'model' as const,
      created: m.created,
      owned_by: m.owned_by,
      type: m.type,
      ...(m.context_length === undefined ? {} : { context_length: m.context_length }),
      ...(m.dimensions === undefined ? {} : { dimensions: m.dimensions }),
    })),
  };
}

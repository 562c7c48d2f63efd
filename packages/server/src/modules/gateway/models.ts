import { findModel, MODELS, modelsOfType, type CatalogueModel, type ModelType } from '@svc/protocol';
import { ApiError } from '../../platform/errors.js';

const ROUTE_NOUN: Record<ModelType, string> = {
  chat: 'chat',
  embeddings: 'embeddings',
  transcription: 'transcription',
  image: 'image',
};
const A_MODEL: Record<ModelType, string> = {
  chat: 'a chat model',
  embeddings: 'an embeddings model',
  transcription: 'a transcription model',
  image: 'an image model',
};

/**
 * The catalogue model a `/v1/` route serves, or `404 model_not_found` (OpenAI's answer) when `id`
 * names no catalogue model or one of another type than the route's (an embeddings model on chat).
 *
 * @example
 * requireModel('tinyllama', 'chat').id; // 'tinyllama'
 * requireModel('gpt-4o', 'chat');       // throws 404 model_not_found, param 'model'
 */
export function requireModel(id: string, type: ModelType): CatalogueModel {
  const model = findModel(id);
  if (model && model.type === type) return model;
  const known = modelsOfType(type)
    .map((m) => m.id)
    .join(', ');
  const why = model ? `is ${A_MODEL[model.type]}, not ${A_MODEL[type]}` : 'does not exist in the catalogue';
  throw new ApiError(
    'model_not_found',
    `The model '${id}' ${why}; ${ROUTE_NOUN[type]} models: ${known} (GET /v1/models)`,
    [{ path: '/model', message: `must be a catalogue ${ROUTE_NOUN[type]} model` }],
  );
}

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

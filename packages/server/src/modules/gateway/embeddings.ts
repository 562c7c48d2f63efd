import { findModel, usageCostMicro } from '@svc/protocol';
import type { Static } from '@sinclair/typebox';
import { ApiError } from '../../platform/errors.js';
import { promptTokenBound } from './pricing.js';
import type { EmbeddingsRequest } from './schemas.js';
import { requestId, svcNode, type Finished, type GatewayCall } from './service.js';
import { requireModel } from './models.js';

export interface EmbeddingsCall extends GatewayCall {
  encoding: 'float' | 'base64';
  inputs: number;
}

/**
 * Turns a validated `POST /v1/embeddings` body into a gateway call: one text or up to 2048;
 * `dimensions`, when sent, must be the model's own (these models cannot shorten vectors).
 *
 * @example
 * prepareEmbeddings({ model: 'all-MiniLM-L6-v2', input: ['a', 'b'] }).inputs; // 2
 */
export function prepareEmbeddings(body: Static<typeof EmbeddingsRequest>): EmbeddingsCall {
  const model = requireModel(body.model, 'embeddings');
  if (body.dimensions !== undefined && body.dimensions !== null && body.dimensions !== model.dimensions) {
    throw new ApiError(
      'invalid_request',
      `dimensions must be ${model.dimensions} for ${model.id} (it cannot be shortened)`,
      [{ path: '/dimensions', message: `must be ${model.dimensions}` }],
    );
  }
  const input = typeof body.input === 'string' ? [body.input] : body.input;
  return {
    id: requestId('emb'),
    type: 'embeddings',
    model: model.id,
    payload: { model: model.id, input },
    stream: false,
    route: {
      jurisdiction: body.jurisdiction ?? undefined,
      strict_jurisdiction: body.strict_jurisdiction ?? undefined,
      requires_tee: body.requires_tee ?? undefined,
    },
    maxMicro: usageCostMicro(model.id, { prompt_tokens: promptTokenBound(input) }),
    encoding: body.encoding_format === 'base64' ? 'base64' : 'float',
    inputs: input.length,
  };
}

/** Little-endian float32, base64: what OpenAI returns for `encoding_format: base64`. */
export function base64Floats(vector: readonly number[]): string {
  const buf = Buffer.alloc(vector.length * 4);
  vector.forEach((x, i) => buf.writeFloatLE(x, i * 4));
  return buf.toString('base64');
}

/**
 * The vectors of a node's embeddings result `{data: [{index, embedding}]}`, in input order, checked
 * against the number of inputs and the model's dimensions (502 `upstream_error` when they differ).
 *
 * @example
 * embeddingVectors(Buffer.from('{"data":[{"index":0,"embedding":[0.1]}]}'), 'm', 1); // [[0.1]]
 */
export function embeddingVectors(output: Buffer, model: string, inputs: number): number[][] {
  let parsed: { data?: { index?: number; embedding?: unknown }[] };
  try {
    parsed = JSON.parse(output.toString('utf8')) as typeof parsed;
  } catch {
    throw new ApiError('upstream_error', 'the node returned an embeddings result that is not JSON');
  }
  const data = parsed.data ?? [];
  const dimensions = findModel(model)?.dimensions;
  if (data.length !== inputs)
    throw new ApiError('upstream_error', `the node returned ${data.length} embeddings for ${inputs} inputs`);
  return data.map((item, i) => {
    const v = item.embedding;
    if (
      !Array.isArray(v) ||
      !v.every((x) => typeof x === 'number') ||
      (dimensions !== undefined && v.length !== dimensions)
    ) {
      throw new ApiError('upstream_error', `the node returned a malformed embedding at index ${i}`);
    }
    return v as number[];
  });
}

/** The OpenAI embeddings list from the node's result `{data: [{index, embedding}]}`. */
export function embeddingsView(call: EmbeddingsCall, done: Finished) {
  const vectors = embeddingVectors(done.output, call.model, call.inputs);
  const tokens = done.request.usage?.prompt_tokens ?? 0;
  return {
    object: 'list' as const,
    id: call.id,
    data: vectors.map((embedding, index) => ({
      object: 'embedding' as const,
      index,
      embedding: call.encoding === 'base64' ? base64Floats(embedding) : embedding,
    })),
    model: call.model,
    usage: { prompt_tokens: tokens, total_tokens: tokens },
    svc_node: svcNode(done.attempt.node),
    svc_receipt_id: done.receiptId,
  };
}

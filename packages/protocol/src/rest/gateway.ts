import { Type } from '@sinclair/typebox';
import { DateTime, Nullable, StringEnum } from './common.js';

/** A gateway request's states. */
export const GATEWAY_REQUEST_STATUSES = ['running', 'completed', 'failed', 'cancelled', 'timeout'] as const;

/** A gateway request as `GET /api/v1/gateway/requests` lists it. */
export const GatewayRequestRecordSchema = Type.Object(
  {
    id: Type.String({ description: "the completion id, also the SVC1 receipt's job_id" }),
    type: StringEnum(['chat', 'embeddings', 'transcription', 'image'] as const),
    model: Type.String(),
    stream: Type.Boolean(),
    status: StringEnum(GATEWAY_REQUEST_STATUSES),
    node_id: Nullable(Type.String()),
    country: Nullable(Type.String({ description: 'where the serving node is declared' })),
    receipt_id: Nullable(Type.String()),
    charged_cents: Nullable(Type.Integer({ description: 'whole cents moved (after the sub-cent carry; may be 0)' })),
    charged_micro: Nullable(Type.Integer({ description: 'the exact charge in micro-CAD' })),
    charged: Nullable(Type.Number(), { description: 'the exact charge in CAD' }),
    usage: Nullable(Type.Object({}, { additionalProperties: true })),
    error: Nullable(Type.String()),
    created_at: DateTime,
    completed_at: Nullable(DateTime),
  },
  { $id: 'GatewayRequestRecord' },
);

export const GatewayRequestListResponseSchema = Type.Object(
  {
    requests: Type.Array(Type.Ref(GatewayRequestRecordSchema)),
    total: Type.Integer(),
    limit: Type.Integer(),
    offset: Type.Integer(),
  },
  { $id: 'GatewayRequestListResponse' },
);

/** The answer to `GET /v1/models` (OpenAI's list shape). */
export const ModelListSchema = Type.Object(
  {
    object: Type.Literal('list'),
    data: Type.Array(
      Type.Object(
        {
          id: Type.String(),
          object: Type.Literal('model'),
          created: Type.Integer(),
          owned_by: Type.String(),
          type: Type.String({ description: 'chat, embeddings, transcription or image' }),
          context_length: Type.Optional(Type.Integer()),
          dimensions: Type.Optional(Type.Integer()),
        },
        { additionalProperties: true },
      ),
    ),
  },
  { $id: 'ModelList' },
);

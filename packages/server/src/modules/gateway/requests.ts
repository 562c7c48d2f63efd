import { microToCad } from '@svc/protocol';
import { Type } from '@sinclair/typebox';
import {
  GATEWAY_REQUEST_STATUSES,
  GatewayRequestListResponseSchema,
  GatewayRequestRecordSchema,
} from '@svc/protocol/rest';
import type { ServiceContext } from '../../service-context.js';
import { ApiError } from '../../platform/errors.js';
import type { Principal } from '../../platform/principal.js';
import { StringEnum } from '../../platform/schemas.js';
import { assistantMessage, chatOutput, chatUsage } from './chat.js';
import { nodeImages, storeImageFiles } from './images.js';
import { findOrgGatewayRequest, listGatewayRequests, type GatewayRequestRow, type GatewayStatus } from './store.js';
import { readWorkResult } from '../work/results.js';

/** Shapes the dashboard reads too: defined once in `@svc/protocol/rest`, named here as the routes use them. */
export const GatewayRequestRecord = GatewayRequestRecordSchema;
export const GatewayRequestListResponse = GatewayRequestListResponseSchema;

export const GatewayRequestListQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
    offset: Type.Optional(Type.Integer({ minimum: 0, default: 0 })),
    status: Type.Optional(StringEnum(GATEWAY_REQUEST_STATUSES)),
  },
  { additionalProperties: false },
);

function requestRecord(r: GatewayRequestRow & { country: string | null }) {
  return {
    id: r.id,
    type: r.type,
    model: r.model,
    stream: r.stream,
    status: r.status,
    node_id: r.node_id,
    country: r.country,
    receipt_id: r.receipt_id,
    charged_cents: r.charged_cents,
    charged_micro: r.charged_micro,
    charged: r.charged_micro === null ? null : microToCad(r.charged_micro),
    usage: r.usage,
    error: r.error,
    created_at: r.created_at.toISOString(),
    completed_at: r.completed_at?.toISOString() ?? null,
  };
}

/** `GET /api/v1/gateway/requests`: the organization's gateway calls, newest first. */
export async function listRequests(
  ctx: ServiceContext,
  principal: Principal,
  query: { limit?: number; offset?: number; status?: GatewayStatus },
) {
  const limit = query.limit ?? 50;
  const offset = query.offset ?? 0;
  const { rows, total } = await listGatewayRequests(ctx.db, principal.orgId, { limit, offset, status: query.status });
  return { requests: rows.map(requestRecord), total, limit, offset };
}

export const GatewayRequestParams = Type.Object({
  id: Type.String({
    pattern: '^[A-Za-z0-9._:-]{1,256}$',
    description: "the completion's `id` (chatcmpl-..., emb-..., img-...)",
  }),
});

export const GatewayRequestDetail = Type.Intersect(
  [
    Type.Ref(GatewayRequestRecord),
    Type.Object({
      result: Type.Union([Type.Object({}, { additionalProperties: true }), Type.Null()], {
        description:
          'the stored answer of a completed request: the chat.completion body, the embeddings list, the transcription (`text`, `language`, `duration`, `segments`), or `{created, data: [{url}]}` with freshly presigned image URLs; null while running, after a failure, or when the node delivered no stored result (a streamed chat)',
      }),
    }),
  ],
  { $id: 'GatewayRequestDetail' },
);

type Json = Record<string, unknown>;

/** The answer rebuilt from the node's stored result; null when there is none to show. */
async function storedAnswer(ctx: ServiceContext, r: GatewayRequestRow): Promise<Json | null> {
  if (r.status !== 'completed' || !r.work_id) return null;
  const blob = await readWorkResult(ctx, r.work_id);
  if (!blob) return null;
  const created = Math.floor(r.created_at.getTime() / 1000);
  try {
    if (r.type === 'image') return { created, data: await storeImageFiles(ctx, r.id, nodeImages(blob.bytes)) };
    if (r.type === 'chat') {
      const out = chatOutput(blob.bytes);
      return {
        id: r.id,
        object: 'chat.completion',
        created,
        model: r.model,
        choices: [
          {
            index: 0,
            message: assistantMessage(out),
            logprobs: null,
            finish_reason: out.finish_reason,
          },
        ],
        usage: chatUsage(r.usage),
      };
    }
    const parsed = JSON.parse(blob.bytes.toString('utf8')) as Json;
    if (r.type === 'embeddings') {
      const data = Array.isArray(parsed.data) ? (parsed.data as { embedding?: unknown }[]) : [];
      const tokens = r.usage?.prompt_tokens ?? 0;
      return {
        object: 'list',
        id: r.id,
        model: r.model,
        data: data.map((d, index) => ({ object: 'embedding', index, embedding: d.embedding })),
        usage: { prompt_tokens: tokens, total_tokens: tokens },
      };
    }
    const { text, language, duration, segments } = parsed;
    return { text, language, duration, segments };
  } catch (err) {
    if (err instanceof ApiError || err instanceof SyntaxError) return null; // a malformed node result: nothing to show
    throw err;
  }
}

/**
 * `GET /api/v1/gateway/requests/{id}`: one of the organization's requests with its stored
 * answer, so that an answer lost on the way (a crash, a dropped connection) can be fetched
 * again. Another organization's request is 404.
 */
export async function getRequest(ctx: ServiceContext, principal: Principal, id: string) {
  const row = await findOrgGatewayRequest(ctx.db, principal.orgId, id);
  if (!row) throw new ApiError('not_found', `gateway request ${id} not found`);
  return { ...requestRecord(row), result: await storedAnswer(ctx, row) };
}

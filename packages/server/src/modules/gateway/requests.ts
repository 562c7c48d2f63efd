import { microToCad } from '@svc/protocol';
import { Type } from '@sinclair/typebox';
import type { ServiceContext } from '../../context.js';
import type { Principal } from '../../platform/principal.js';
import { StringEnum } from '../auth/schemas.js';
import { listGatewayRequests, type GatewayStatus } from './store.js';

const STATUSES = ['running', 'completed', 'failed', 'cancelled', 'timeout'] as const;

export const GatewayRequestListQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
    offset: Type.Optional(Type.Integer({ minimum: 0, default: 0 })),
    status: Type.Optional(StringEnum(STATUSES)),
  },
  { additionalProperties: false },
);

const Nullable = <T extends ReturnType<typeof Type.String> | ReturnType<typeof Type.Integer>>(t: T) => Type.Union([t, Type.Null()]);

export const GatewayRequestRecord = Type.Object(
  {
    id: Type.String({ description: 'the completion id, also the SVC1 receipt\'s job_id' }),
    type: StringEnum(['chat', 'embeddings', 'transcription', 'image'] as const),
    model: Type.String(),
    stream: Type.Boolean(),
    status: StringEnum(STATUSES),
    node_id: Nullable(Type.String()),
    country: Nullable(Type.String({ description: 'where the serving node is declared' })),
    receipt_id: Nullable(Type.String()),
    charged_cents: Nullable(Type.Integer({ description: 'whole cents moved (after the sub-cent carry; may be 0)' })),
    charged_micro: Nullable(Type.Integer({ description: 'the exact charge in micro-CAD' })),
    charged: Type.Union([Type.Number(), Type.Null()], { description: 'the exact charge in CAD' }),
    usage: Type.Union([Type.Object({}, { additionalProperties: true }), Type.Null()]),
    error: Nullable(Type.String()),
    created_at: Type.String({ format: 'date-time' }),
    completed_at: Nullable(Type.String({ format: 'date-time' })),
  },
  { $id: 'GatewayRequestRecord' },
);

export const GatewayRequestListResponse = Type.Object(
  { requests: Type.Array(Type.Ref(GatewayRequestRecord)), total: Type.Integer(), limit: Type.Integer(), offset: Type.Integer() },
  { $id: 'GatewayRequestListResponse' },
);

/** `GET /api/v1/gateway/requests`: the organization's gateway calls, newest first. */
export async function listRequests(ctx: ServiceContext, principal: Principal, query: { limit?: number; offset?: number; status?: GatewayStatus }) {
  const limit = query.limit ?? 50;
  const offset = query.offset ?? 0;
  const { rows, total } = await listGatewayRequests(ctx.db, principal.orgId, { limit, offset, status: query.status });
  return {
    requests: rows.map((r) => ({
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
    })),
    total,
    limit,
    offset,
  };
}

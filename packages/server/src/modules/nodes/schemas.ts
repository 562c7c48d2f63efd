import {
  HeartbeatBodySchema,
  HeartbeatResponseSchema,
  NodeRegisterRequestSchema,
  NodeRegisterResponseSchema,
  WorkItemSchema,
} from '@svc/protocol';
import { Type } from '@sinclair/typebox';
import { NodeSummarySchema, NodeListResponseSchema, NodeEarningsResponseSchema } from '@svc/protocol/rest';

/** Shapes the dashboard reads too: defined once in `@svc/protocol/rest`, named here as the routes use them. */
export const NodeSummary = NodeSummarySchema;
export const NodeListResponse = NodeListResponseSchema;
export const NodeEarningsResponse = NodeEarningsResponseSchema;

/** The bodies below are the node protocol's, defined once in packages/protocol; here they get their OpenAPI names. */
export const NodeRegisterRequest = Type.Object(NodeRegisterRequestSchema.properties, {
  $id: 'NodeRegisterRequest',
  additionalProperties: false,
});

export const NodeRegisterResponse = Type.Object(NodeRegisterResponseSchema.properties, { $id: 'NodeRegisterResponse' });

/** The body of `POST /api/v1/node/heartbeat` (one shape with the channel's `heartbeat`, in packages/protocol). */
export const HeartbeatRequest = Type.Object(HeartbeatBodySchema.properties, {
  $id: 'HeartbeatRequest',
  additionalProperties: false,
});

export const HeartbeatResponse = Type.Object(HeartbeatResponseSchema.properties, { $id: 'HeartbeatResponse' });

/**
 * The work item of the long-poll (one shape with the channel's `work` message, in
 * packages/protocol); the server always sends an ISO 8601 lease end.
 */
export const WorkItem = Type.Object(
  { ...WorkItemSchema.properties, lease_expires_at: Type.String({ format: 'date-time' }) },
  { $id: 'WorkItem' },
);

/** The answer to `GET /api/v1/node/work`. */
export const WorkList = Type.Object({ work: Type.Array(Type.Ref(WorkItem)) });

export const NodeListQuery = Type.Object({
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
  offset: Type.Optional(Type.Integer({ minimum: 0, default: 0 })),
  status: Type.Optional(Type.Union([Type.Literal('online'), Type.Literal('offline')])),
  country: Type.Optional(Type.String({ pattern: '^[A-Z]{2}$' })),
  model: Type.Optional(Type.String({ maxLength: 64 })),
  scope: Type.Optional(
    Type.Union([Type.Literal('mine'), Type.Literal('all')], {
      description: "`mine` (default): your organization's nodes; `all`: every online node (public fields)",
    }),
  ),
});

import {
  OutputManifestSchema,
  OutputUploadsSchema,
  WorkFailRequestSchema,
  WorkResultResponseSchema,
} from '@svc/protocol';
import { Type } from '@sinclair/typebox';
import type { App } from '../../app.js';
import type { ServiceContext } from '../../context.js';
import { principalOf } from '../../platform/principal.js';
import { MessageResponse } from '../auth/schemas.js';
import { deliverResult, failWork, outputUploadUrls, submitReceipt } from '../receipts/service.js';
import { NodeReceiptRequest, Receipt, ResultRequest } from '../receipts/schemas.js';
import { heartbeat, pollWork } from '../scheduler/node-work.js';
import { nodeOf } from './node-auth.js';
import {
  HeartbeatRequest,
  HeartbeatResponse,
  NodeEarningsResponse,
  NodeListQuery,
  NodeListResponse,
  NodeRegisterRequest,
  NodeRegisterResponse,
  NodeSummary,
  WorkItem,
  WorkList,
} from './schemas.js';
import { listNodeSummaries, nodeEarnings, registerNode } from './service.js';

const tags = ['nodes'];
const node = { auth: { node: true as const } };
const WorkParams = Type.Object({ work_id: Type.String({ pattern: '^wrk_[a-z0-9]{26}$' }) });

export async function nodeRoutes(app: App, ctx: ServiceContext): Promise<void> {
  app.addSchema(NodeSummary);
  app.addSchema(WorkItem);
  app.post(
    '/api/v1/node/register',
    {
      config: { auth: { permission: 'nodes:write' } },
      schema: {
        summary: 'Register a node (operator key; signed with the node key)',
        tags,
        body: NodeRegisterRequest,
        response: { 200: NodeRegisterResponse },
      },
    },
    async (request) => registerNode(ctx, principalOf(request), request.body),
  );
  app.get(
    '/api/v1/node/work',
    {
      config: node,
      schema: {
        summary: 'Long-poll for assigned work (signed node request)',
        tags,
        querystring: Type.Object({
          wait_ms: Type.Optional(Type.Integer({ minimum: 0, maximum: 30_000, default: 25_000 })),
          max: Type.Optional(Type.Integer({ minimum: 1, maximum: 16, default: 1 })),
        }),
        response: { 200: WorkList },
      },
    },
    async (request) => {
      const abort = new AbortController();
      request.raw.once('close', () => abort.abort());
      return pollWork(ctx, nodeOf(request), {
        waitMs: request.query.wait_ms ?? 25_000,
        max: request.query.max ?? 1,
        signal: abort.signal,
      });
    },
  );
  app.post(
    '/api/v1/node/heartbeat',
    {
      config: node,
      schema: {
        summary: 'Liveness, load and lease renewal; answers the work to stop',
        tags,
        body: HeartbeatRequest,
        response: { 200: HeartbeatResponse },
      },
    },
    async (request) => heartbeat(ctx, nodeOf(request), request.body),
  );
  app.post(
    '/api/v1/node/work/:work_id/result',
    {
      config: node,
      bodyLimit: 96 * 1024 * 1024,
      schema: {
        summary: 'Upload the result of leased work',
        tags,
        params: WorkParams,
        body: ResultRequest,
        response: { 200: WorkResultResponseSchema },
      },
    },
    async (request) => deliverResult(ctx, nodeOf(request), request.params.work_id, request.body),
  );
  app.post(
    '/api/v1/node/work/:work_id/outputs',
    {
      config: node,
      schema: {
        summary: 'Declare the outputs of kind 8 or 10 work and get a presigned PUT URL for each',
        tags,
        params: WorkParams,
        body: OutputManifestSchema,
        response: { 200: OutputUploadsSchema },
      },
    },
    async (request) => outputUploadUrls(ctx, nodeOf(request), request.params.work_id, request.body),
  );
  app.post(
    '/api/v1/node/work/:work_id/fail',
    {
      config: node,
      schema: {
        summary: 'Report that leased work failed',
        tags,
        params: WorkParams,
        body: WorkFailRequestSchema,
        response: { 200: MessageResponse },
      },
    },
    async (request) => failWork(ctx, nodeOf(request), request.params.work_id, request.body),
  );
  app.post(
    '/api/v1/node/receipt',
    {
      config: node,
      bodyLimit: 96 * 1024 * 1024,
      schema: {
        summary: 'Submit the SVC1 receipt of delivered work; completes it',
        tags,
        body: NodeReceiptRequest,
        response: { 200: Receipt },
      },
    },
    async (request) => submitReceipt(ctx, nodeOf(request), request.body),
  );
  app.get(
    '/api/v1/nodes',
    {
      // nodes:read: buyer, read-only and operator keys; a buyer needs no operator scope to see the public capacity.
      config: { auth: { permission: 'nodes:read' } },
      schema: {
        summary:
          "Your organization's nodes; with scope=all every online node's public capacity (country, region, models, hardware; no operator name or organization). Buyer, read-only and operator keys",
        description:
          "GET /api/v1/nodes lists the caller's organization's nodes, online or not (filters status, country, model). GET /api/v1/nodes?scope=all&country=CA lists every online node in Canada, whoever operates it: the public capacity a buyer can route to (docs/marketplace.md).",
        tags,
        querystring: NodeListQuery,
        response: { 200: NodeListResponse },
      },
    },
    async (request) => listNodeSummaries(ctx, principalOf(request), request.query),
  );
  app.get(
    '/api/v1/nodes/earnings',
    {
      config: { auth: { permission: 'payouts:read' } },
      schema: {
        summary: "What your organization's nodes earned, per node",
        tags,
        response: { 200: NodeEarningsResponse },
      },
    },
    async (request) => nodeEarnings(ctx, principalOf(request)),
  );
}

import type { App } from '../../app.js';
import type { ServiceContext } from '../../service-context.js';
import { principalOf } from '../../platform/principal.js';
import {
  NodeEarningsResponse,
  NodeListQuery,
  NodeListResponse,
  NodeRegisterRequest,
  NodeRegisterResponse,
  NodeSummary,
} from './schemas.js';
import { listNodeSummaries, nodeEarnings, registerNode } from './service.js';

const tags = ['nodes'];
export async function nodeRoutes(app: App, ctx: ServiceContext): Promise<void> {
  app.addSchema(NodeSummary);
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

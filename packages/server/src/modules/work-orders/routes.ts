import { Type, type Static } from '@sinclair/typebox';
import type { App } from '../../app.js';
import type { ServiceContext } from '../../service-context.js';
import { principalOf } from '../../platform/principal.js';
import { MessageResponse } from '../../platform/schemas.js';
import { EvidenceBundleResponse } from '../evidence/schemas.js';
import { orderBundle, orderEvidence } from './evidence.js';
import {
  createOrder,
  decide,
  listOrders,
  loadOrder,
  orderDiff,
  orderView,
  rollbackOrder,
  syncExecutingOrders,
} from './orders.js';
import {
  createRepository,
  deleteRepository,
  getRepository,
  listRepositories,
  preflight,
  repositoryView,
} from './repositories.js';
import {
  CreateWorkOrderRequest,
  CreateWorkRepositoryRequest,
  DecisionRequest,
  IdParams,
  PreflightWorkRepositoryRequest,
  PreflightWorkRepositoryResponse,
  WorkOrder,
  WorkOrderDiff,
  WorkOrderList,
  WorkOrderListQuery,
  WorkRepositoryConnection,
  WorkRepositoryList,
} from './schemas.js';

const tags = ['work orders'];
const read = { auth: { permission: 'jobs:read' as const } };
const write = { auth: { permission: 'jobs:write' as const } };
/** How often every instance looks for orders whose job finished while nobody was reading them. */
const SWEEP_MS = 1_000;

/**
 * Work orders and repository connections (DESIGN.md section 15, docs/work-orders.md). Orders
 * follow their kind 9 job: each read applies the job's outcome, and a sweep does so for orders
 * nobody reads (an auto-approved order opens its pull request without a caller).
 */
export async function workOrderRoutes(app: App, ctx: ServiceContext): Promise<void> {
  for (const schema of [WorkRepositoryConnection, PreflightWorkRepositoryResponse, WorkOrder]) app.addSchema(schema);
  let sweeping: Promise<unknown> = Promise.resolve();
  const timer = setInterval(() => {
    sweeping = sweeping
      .then(() => syncExecutingOrders(ctx))
      .catch((err: unknown) => ctx.log.error({ err }, 'work order sweep failed'));
  }, SWEEP_MS);
  timer.unref();
  app.addHook('onClose', async () => {
    clearInterval(timer);
    await sweeping;
  });

  app.post(
    '/api/v1/work/repositories',
    {
      config: write,
      schema: {
        summary: 'Connect a repository (its host token is stored encrypted, never returned)',
        tags,
        body: CreateWorkRepositoryRequest,
        response: { 201: Type.Ref(WorkRepositoryConnection) },
      },
    },
    async (request, reply) => reply.code(201).send(await createRepository(ctx, principalOf(request), request.body)),
  );
  app.get(
    '/api/v1/work/repositories',
    {
      config: read,
      schema: { summary: 'Repository connections of the organization', tags, response: { 200: WorkRepositoryList } },
    },
    async (request) => listRepositories(ctx, principalOf(request)),
  );
  app.get(
    '/api/v1/work/repositories/:id',
    {
      config: read,
      schema: {
        summary: 'One repository connection',
        tags,
        params: IdParams,
        response: { 200: Type.Ref(WorkRepositoryConnection) },
      },
    },
    async (request) => repositoryView(await getRepository(ctx, principalOf(request), request.params.id)),
  );
  app.delete(
    '/api/v1/work/repositories/:id',
    {
      config: write,
      schema: {
        summary: 'Delete a repository connection and erase its token',
        tags,
        params: IdParams,
        response: { 200: MessageResponse },
      },
    },
    async (request) => deleteRepository(ctx, principalOf(request), request.params.id),
  );
  app.post(
    '/api/v1/work/repositories/:id/preflight',
    {
      config: write,
      schema: {
        summary: 'Preflight: a node clones the base branch and checks the tooling (waits up to timeout_seconds)',
        tags,
        params: IdParams,
        body: Type.Optional(PreflightWorkRepositoryRequest),
        response: { 200: Type.Ref(PreflightWorkRepositoryResponse) },
      },
    },
    async (request) => preflight(ctx, principalOf(request), request.params.id, request.body ?? {}),
  );

  app.post(
    '/api/v1/work/orders',
    {
      config: write,
      schema: {
        summary: 'Create a work order: a node runs the capsule on a work branch; policy certifies the result',
        tags,
        body: CreateWorkOrderRequest,
        response: { 201: Type.Ref(WorkOrder) },
      },
    },
    async (request, reply) => reply.code(201).send(await createOrder(ctx, principalOf(request), request.body)),
  );
  app.get(
    '/api/v1/work/orders',
    {
      config: read,
      schema: {
        summary: 'Work orders, newest first',
        tags,
        querystring: WorkOrderListQuery,
        response: { 200: WorkOrderList },
      },
    },
    async (request) => listOrders(ctx, principalOf(request), request.query),
  );
  app.get(
    '/api/v1/work/orders/:id',
    {
      config: read,
      schema: {
        summary: 'One work order with its decision',
        tags,
        params: IdParams,
        response: { 200: Type.Ref(WorkOrder) },
      },
    },
    async (request) => orderView(await loadOrder(ctx, principalOf(request), request.params.id)),
  );
  for (const [action, decision] of [
    ['approve', 'approved'],
    ['reject', 'rejected'],
  ] as const) {
    app.post(
      `/api/v1/work/orders/:id/${action}`,
      {
        config: write,
        schema: {
          summary: `${action === 'approve' ? 'Approve (pushes the branch, opens the pull request)' : 'Reject'} a certified or needs-review order (owners and admins)`,
          tags,
          params: IdParams,
          body: Type.Optional(DecisionRequest),
          response: { 200: Type.Ref(WorkOrder) },
        },
      },
      async (request) => decide(ctx, principalOf(request), request.params.id, decision, request.body?.reason),
    );
  }
  app.post(
    '/api/v1/work/orders/:id/rollback',
    {
      config: write,
      schema: {
        summary: 'Roll an opened order back to its base commit (revert pull request, or the work branch withdrawn)',
        tags,
        params: IdParams,
        body: Type.Optional(DecisionRequest),
        response: { 200: Type.Ref(WorkOrder) },
      },
    },
    async (request) => rollbackOrder(ctx, principalOf(request), request.params.id, request.body?.reason),
  );
  app.get(
    '/api/v1/work/orders/:id/diff',
    {
      config: read,
      schema: {
        summary: 'The diff the capsule produced, against the base commit',
        tags,
        params: IdParams,
        response: { 200: WorkOrderDiff },
      },
    },
    async (request) => orderDiff(ctx, principalOf(request), request.params.id),
  );
  app.get(
    '/api/v1/work/orders/:id/evidence',
    {
      config: { auth: { permission: 'evidence:read' as const } },
      schema: {
        summary: "The order's evidence graph",
        tags,
        params: IdParams,
        response: { 200: Type.Ref('EvidenceGraphResponse') },
      },
    },
    async (request) => orderEvidence(ctx, principalOf(request), request.params.id),
  );
  app.get(
    '/api/v1/work/orders/:id/evidence/bundle',
    {
      config: { auth: { permission: 'evidence:read' as const } },
      schema: {
        summary: 'Verifier bundle of the order, with its work_order section',
        tags,
        params: IdParams,
        response: { 200: EvidenceBundleResponse },
      },
    },
    async (request, reply) => {
      const bundle = await orderBundle(ctx, principalOf(request), request.params.id);
      return reply
        .type('application/json; charset=utf-8')
        .header('content-disposition', `attachment; filename="${bundle.fileName}"`)
        .send(bundle.text as unknown as Static<typeof EvidenceBundleResponse>);
    },
  );
}

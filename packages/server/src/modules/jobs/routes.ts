import { Type } from '@sinclair/typebox';
import type { App } from '../../app.js';
import type { ServiceContext } from '../../service-context.js';
import { principalOf } from '../../platform/principal.js';
import {
  AuditResponse,
  CreateJobRequest,
  CreateJobResponse,
  EstimateRequest,
  EstimateResponse,
  JobIdParams,
  JobListQuery,
  JobListResponse,
  MarketplaceJob,
  MarketplaceSLAResponse,
} from './schemas.js';
import { cancelJob, createJob, estimate, getJob, jobAudit, jobResult, listJobs, pricing } from './service.js';
import { sla } from './sla.js';

const tags = ['marketplace'];
const read = { auth: { permission: 'jobs:read' as const } };
const write = { auth: { permission: 'jobs:write' as const } };

export async function jobRoutes(app: App, ctx: ServiceContext): Promise<void> {
  app.addSchema(MarketplaceJob);
  app.post(
    '/api/v1/marketplace/estimate',
    {
      config: read,
      schema: {
        summary:
          "Estimate the cost of a job: the submission's estimated_cost for the same fields (inputs counted, a transcription's audio measured)",
        tags,
        body: EstimateRequest,
        response: { 200: EstimateResponse },
      },
    },
    async (request) => estimate(ctx, request.body),
  );
  app.get(
    '/api/v1/marketplace/pricing',
    {
      config: { auth: { permission: 'models:read' } },
      schema: {
        summary: 'Prices per job kind (CAD per unit)',
        tags,
        response: {
          200: Type.Object({
            currency: Type.String(),
            kinds: Type.Array(Type.Object({}, { additionalProperties: true })),
          }),
        },
      },
    },
    async () => pricing(),
  );
  app.post(
    '/api/v1/marketplace/jobs',
    {
      config: write,
      schema: {
        summary: 'Submit a job (its budget is held until it finishes)',
        tags,
        body: CreateJobRequest,
        response: { 201: CreateJobResponse },
      },
    },
    async (request, reply) => reply.code(201).send(await createJob(ctx, principalOf(request), request.body)),
  );
  app.get(
    '/api/v1/marketplace/jobs',
    {
      config: read,
      schema: {
        summary: 'List jobs, newest first',
        tags,
        querystring: JobListQuery,
        response: { 200: JobListResponse },
      },
    },
    async (request) => listJobs(ctx, principalOf(request), request.query),
  );
  app.get(
    '/api/v1/marketplace/jobs/:id',
    { config: read, schema: { summary: 'One job', tags, params: JobIdParams, response: { 200: MarketplaceJob } } },
    async (request) => getJob(ctx, principalOf(request), request.params.id),
  );
  app.post(
    '/api/v1/marketplace/jobs/:id/cancel',
    {
      config: write,
      schema: {
        summary: 'Cancel a job that has not finished; its hold is released',
        tags,
        params: JobIdParams,
        response: { 200: MarketplaceJob },
      },
    },
    async (request) => cancelJob(ctx, principalOf(request), request.params.id),
  );
  app.get(
    '/api/v1/marketplace/jobs/:id/audit',
    {
      config: read,
      schema: {
        summary: 'Audit trail: events and ledger rows of a job',
        tags,
        params: JobIdParams,
        response: { 200: AuditResponse },
      },
    },
    async (request) => jobAudit(ctx, principalOf(request), request.params.id),
  );
  app.get(
    '/api/v1/marketplace/jobs/:id/result',
    {
      config: read,
      schema: {
        summary: "A completed job's result (inline delivery)",
        tags,
        params: JobIdParams,
        produces: ['application/octet-stream'],
        response: { 200: Type.Unsafe<Buffer>({ type: 'string', format: 'binary', description: 'the result bytes' }) },
      },
    },
    async (request, reply) => {
      const result = await jobResult(ctx, principalOf(request), request.params.id);
      void reply.header('x-svc-result-hash', result.resultHash);
      if (result.fileName) void reply.header('content-disposition', `attachment; filename="${result.fileName}"`);
      return reply.type(result.contentType).send(result.bytes);
    },
  );
  app.get(
    '/api/v1/marketplace/sla',
    {
      config: read,
      schema: {
        summary: 'Assignment latency and completion rate against targets',
        tags,
        querystring: Type.Object({
          window_hours: Type.Optional(Type.Integer({ minimum: 1, maximum: 720, default: 24 })),
        }),
        response: { 200: MarketplaceSLAResponse },
      },
    },
    async (request) => sla(ctx, principalOf(request), request.query.window_hours ?? 24),
  );
}

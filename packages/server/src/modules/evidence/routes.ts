import { Type, type Static } from '@sinclair/typebox';
import type { App } from '../../app.js';
import type { ServiceContext } from '../../service-context.js';
import { ApiError } from '../../platform/errors.js';
import { principalOf } from '../../platform/principal.js';
import {
  EvidenceBundleResponse,
  EvidenceCertificate,
  EvidenceEdge,
  EvidenceEvent,
  EvidenceGraphResponse,
  EvidenceRun,
  EvidenceRunsQuery,
  EvidenceRunsResponse,
} from './schemas.js';
import { evidenceBundle, evidenceGraph, evidenceRuns, storedRunStatus } from './service.js';

const tags = ['evidence'];
const read = { auth: { permission: 'evidence:read' as const } };
/** A job id or a gateway completion id (the receipt's job_id). */
const SubjectParam = Type.Object({ job: Type.String({ pattern: '^[A-Za-z0-9._:-]{1,256}$' }) });

export async function evidenceRoutes(app: App, ctx: ServiceContext): Promise<void> {
  for (const schema of [EvidenceRun, EvidenceEvent, EvidenceEdge, EvidenceCertificate]) app.addSchema(schema);
  app.addSchema(EvidenceGraphResponse);
  app.addSchema(EvidenceRunsResponse);
  app.get(
    '/api/v1/jobs/:job/evidence',
    {
      config: read,
      schema: {
        summary: 'Evidence graph of a job or gateway request, with its certificate verified now',
        tags,
        params: SubjectParam,
        response: { 200: Type.Ref(EvidenceGraphResponse) },
      },
    },
    async (request) => evidenceGraph(ctx, principalOf(request), request.params.job),
  );
  app.get(
    '/api/v1/jobs/:job/evidence/bundle',
    {
      config: read,
      schema: {
        summary: 'Verifier bundle (svc.evidence_bundle.v1) of a job or gateway request, as a download',
        tags,
        params: SubjectParam,
        response: { 200: EvidenceBundleResponse },
      },
    },
    async (request, reply) => {
      const bundle = await evidenceBundle(ctx, principalOf(request), request.params.job);
      // The exact bytes whose parsed value bundle_hash covers: sent as text, never re-serialised.
      return reply
        .type('application/json; charset=utf-8')
        .header('content-disposition', `attachment; filename="${bundle.fileName}"`)
        .send(bundle.text as unknown as Static<typeof EvidenceBundleResponse>);
    },
  );
  app.get(
    '/api/v1/evidence',
    {
      config: read,
      schema: {
        summary: 'Evidence runs, newest first, with filters',
        tags,
        querystring: EvidenceRunsQuery,
        response: { 200: Type.Ref(EvidenceRunsResponse) },
      },
    },
    async (request) => {
      const q = request.query;
      const from = q.from === undefined ? undefined : new Date(q.from);
      const to = q.to === undefined ? undefined : new Date(q.to);
      if (from && to && from >= to)
        throw new ApiError('invalid_request', '`from` must be before `to`', [
          { path: '/to', message: 'must be after from' },
        ]);
      return evidenceRuns(ctx, principalOf(request), {
        job_id: q.job_id,
        status: q.status === undefined ? undefined : storedRunStatus(q.status),
        from,
        to,
        limit: q.limit ?? 50,
        offset: q.offset ?? 0,
      });
    },
  );
}

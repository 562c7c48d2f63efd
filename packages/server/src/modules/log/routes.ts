import { Type } from '@sinclair/typebox';
import type { App } from '../../app.js';
import type { ServiceContext } from '../../service-context.js';
import { principalOf } from '../../platform/principal.js';
import { ConsistencyQuery, ConsistencyResponse, InclusionQuery, InclusionResponse } from './schemas.js';
import { consistencyProof, inclusionProof, logCheckpoint, logTile } from './service.js';

const tags = ['log'];
const open = { auth: { public: true as const } };
/** A full tile never changes; a partial one neither, but the next width supersedes it soon. */
const IMMUTABLE = 'public, max-age=31536000, immutable';
const PARTIAL = 'public, max-age=60';

/** The transparency log's read paths (DESIGN.md section 17, docs/transparency-log.md). */
export async function logRoutes(app: App, ctx: ServiceContext): Promise<void> {
  const checkpointMaxAge = Math.max(1, Math.floor(ctx.transparencyLog.intervalMs / 1000));
  app.get(
    '/api/v1/log/checkpoint',
    {
      config: open,
      schema: {
        summary: "The log's latest checkpoint: a signed note (origin, tree size, base64 root)",
        tags,
        produces: ['text/plain'],
        response: { 200: Type.String() },
      },
    },
    async (_request, reply) =>
      reply
        .type('text/plain; charset=utf-8')
        .header('cache-control', `public, max-age=${checkpointMaxAge}`)
        .send(await logCheckpoint(ctx)),
  );
  app.get(
    '/api/v1/log/tile/*',
    {
      config: open,
      schema: {
        summary: 'A hash tile as sumdb/tlog names it: tile/8/{L}/{N}[.p/{W}]',
        tags,
        produces: ['application/octet-stream'],
        params: Type.Object({ '*': Type.String({ maxLength: 128 }) }),
      },
    },
    async (request, reply) => {
      const tile = await logTile(ctx, request.params['*']);
      return reply
        .type('application/octet-stream')
        .header('cache-control', tile.full ? IMMUTABLE : PARTIAL)
        .send(tile.bytes);
    },
  );
  app.get(
    '/api/v1/log/proof/consistency',
    {
      config: open,
      schema: {
        summary: 'Consistency proof between two tree sizes (base64 hashes, as tlog.ProveTree)',
        tags,
        querystring: ConsistencyQuery,
        response: { 200: ConsistencyResponse },
      },
    },
    async (request, reply) => {
      const body = await consistencyProof(ctx, request.query.from, request.query.to);
      return reply.header('cache-control', IMMUTABLE).send(body);
    },
  );
  app.get(
    '/api/v1/log/proof/inclusion',
    {
      config: { auth: { permission: 'evidence:read' as const } },
      schema: {
        summary: "Inclusion proof of one of your organization's runs (tlog.ProveRecord)",
        tags,
        querystring: InclusionQuery,
        response: { 200: InclusionResponse },
      },
    },
    async (request) => inclusionProof(ctx, principalOf(request).orgId, request.query.run_id, request.query.tree_size),
  );
}

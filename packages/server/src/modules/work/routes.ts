import {
  EventsResponseSchema,
  OutputManifestSchema,
  OutputUploadsSchema,
  WorkFailRequestSchema,
  WorkResultResponseSchema,
} from '@svc/protocol';
import { Type } from '@sinclair/typebox';
import type { App } from '../../app.js';
import type { ServiceContext } from '../../service-context.js';
import { MessageResponse } from '../../platform/schemas.js';
import { nodeOf } from '../nodes/node-auth.js';
import { HeartbeatRequest, HeartbeatResponse, WorkItem, WorkList } from '../nodes/schemas.js';
import { NodeReceiptRequest, Receipt, ResultRequest } from '../receipts/schemas.js';
import { deliverResult, failWork, outputUploadUrls, receiptWithResultHash, submitReceipt } from './intake.js';
import { acceptEvents } from './node-events.js';
import { heartbeat, pollWork } from './node-work.js';
import { watchPollHangUps } from './node-loss.js';

const tags = ['nodes'];
const node = { auth: { node: true as const } };
const WorkParams = Type.Object({ work_id: Type.String({ pattern: '^wrk_[a-z0-9]{26}$' }) });

/**
 * The node protocol's HTTP routes under `/api/v1/node/` (docs/node-protocol.md): the long-poll,
 * heartbeats, results, outputs, failures, receipts and stream events of signed node requests.
 * Registration (`/api/v1/node/register`, an operator call) stays with modules/nodes; the node
 * channel (the same protocol over a WebSocket) is `channel-routes.ts`.
 */
export async function workRoutes(app: App, ctx: ServiceContext): Promise<void> {
  // The polls this instance ends as it shuts down are not nodes lost: the watch stops first.
  const hangUps = watchPollHangUps(ctx);
  app.addHook('preClose', async () => hangUps.close());
  app.addSchema(WorkItem);
  app.get(
    '/api/v1/node/work',
    {
      // Capture work carries presigned URLs of its inputs: capability URLs, not to be cached.
      config: { ...node, noStore: true },
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
    async (request, reply) => {
      const abort = new AbortController();
      request.raw.once('close', () => abort.abort());
      const node = nodeOf(request);
      // Closed before its answer was sent: the node hung up (or was killed). Unless it calls again
      // soon, it is taken for gone (node-loss.ts). `reply.sent` too: an injected request's
      // response (app.inject) closes without `writableFinished`.
      const hungUp = hangUps.started(node.id);
      reply.raw.once('close', () => {
        if (!reply.sent && !reply.raw.writableFinished) hungUp();
      });
      return pollWork(ctx, node, {
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
      config: { ...node, noStore: true },
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
    async (request) => submitReceipt(ctx, nodeOf(request), receiptWithResultHash(request.body)),
  );

  // Node stream events are NDJSON, signed over their exact bytes like every node call.
  app.addContentTypeParser('application/x-ndjson', { parseAs: 'buffer' }, (request, body, done) => {
    request.rawBody = body as Buffer;
    done(null, (body as Buffer).toString('utf8'));
  });
  app.post(
    '/api/v1/node/work/:work_id/events',
    {
      config: node,
      bodyLimit: 4 * 1024 * 1024,
      schema: {
        summary: 'Stream events of leased streamed work: NDJSON lines, signed; answers whether to stop',
        tags,
        consumes: ['application/x-ndjson'],
        params: WorkParams,
        body: Type.String({
          description:
            'NDJSON: {"type":"delta","content":"..."}, {"type":"done","usage":{...},"finish_reason":"stop"}, {"type":"error","message":"..."}',
        }),
        response: {
          200: EventsResponseSchema,
        },
      },
    },
    async (request) =>
      acceptEvents(ctx, nodeOf(request), request.params.work_id, typeof request.body === 'string' ? request.body : ''),
  );
}

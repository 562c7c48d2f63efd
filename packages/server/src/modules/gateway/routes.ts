import multipart from '@fastify/multipart';
import { hop } from '@svc/protocol';
import { Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { App } from '../../app.js';
import type { ServiceContext } from '../../service-context.js';
import { ApiError } from '../../platform/errors.js';
import { CLOSE_CONNECTION, filePartBytes } from '../../platform/multipart.js';
import { principalOf } from '../../platform/principal.js';
import { MAX_AUDIO_BYTES, prepareTranscription, transcriptionView } from './audio.js';
import { chatCompletionView, prepareChat } from './chat.js';
import { embeddingsView, prepareEmbeddings } from './embeddings.js';
import { checkFileUrl, fileBlobKey } from './files.js';
import { imagesView, prepareImages } from './images.js';
import { listModels } from './models.js';
import {
  GatewayRequestDetail,
  GatewayRequestListQuery,
  GatewayRequestListResponse,
  GatewayRequestParams,
  GatewayRequestRecord,
  getRequest,
  listRequests,
} from './requests.js';
import {
  ChatCompletion,
  ChatCompletionRequest,
  ChatSource,
  EmbeddingsRequest,
  EmbeddingsResponse,
  ImageRequest,
  ImageResponse,
  ModelList,
  SvcNode,
  TranscriptionForm,
  TranscriptionResponse,
} from './schemas.js';
import { sweepAbandonedRequests } from './orphans.js';
import { runRequest, sweepStaleRequests, type Finished } from './service.js';
import { streamChat } from './stream.js';

const tags = ['gateway'];
const inference = { auth: { permission: 'inference:write' as const } };

/** Headers of every non-streamed gateway answer: who served it, its receipt, its id. */
function served(reply: FastifyReply, done: Finished, id: string): void {
  void reply.headers({
    'x-svc-node': done.attempt.node.id,
    'x-svc-receipt': done.receiptId,
    'x-svc-completion-id': id,
  });
}

async function readAudioForm(
  request: FastifyRequest,
): Promise<{ fields: Record<string, string>; file: { bytes: Buffer; filename: string } | undefined }> {
  if (!request.isMultipart())
    throw new ApiError('unsupported_media_type', 'send multipart/form-data with the audio in the field "file"');
  const fields: Record<string, string> = {};
  let file: { bytes: Buffer; filename: string } | undefined;
  try {
    for await (const part of request.parts()) {
      if (part.type === 'file') {
        const bytes = await filePartBytes(part);
        if (part.fieldname === 'file' && !file) file = { bytes, filename: part.filename };
      } else if (typeof part.value === 'string' || typeof part.value === 'number' || typeof part.value === 'boolean') {
        fields[part.fieldname] = String(part.value);
      }
    }
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === 'FST_REQ_FILE_TOO_LARGE')
      throw new ApiError(
        'payload_too_large',
        `the audio file is larger than ${MAX_AUDIO_BYTES / 1024 / 1024} MiB`,
        undefined,
        CLOSE_CONNECTION,
      );
    if (code === 'FST_FILES_LIMIT' || code === 'FST_PARTS_LIMIT' || code === 'FST_FIELDS_LIMIT')
      throw new ApiError('payload_too_large', 'too many parts in the form', undefined, CLOSE_CONNECTION);
    if (err instanceof ApiError) throw err;
    // Everything else here is the form's own fault: no or an over-long boundary, a truncated part,
    // a malformed header. Only the client's bytes are read in this loop.
    throw new ApiError(
      'invalid_request',
      `malformed multipart/form-data body: ${err instanceof Error ? err.message : 'unreadable'}`,
    );
  }
  return { fields, file };
}

/**
 * The inference gateway (api-spec.md part 4, DESIGN.md section 10): OpenAI's wire format on
 * `/v1`, the presigned file route, and the node's stream-events call.
 */
export async function gatewayRoutes(app: App, ctx: ServiceContext): Promise<void> {
  const sweeper = setInterval(
    () =>
      void sweepStaleRequests(ctx).catch((err: unknown) =>
        ctx.log.warn({ err }, 'gateway: stale request sweep failed'),
      ),
    60_000,
  );
  sweeper.unref();
  // Requests whose follow loop died with its instance, once their attempt failed (orphans.ts).
  let sweeping = false;
  const abandoned = setInterval(() => {
    if (sweeping) return;
    sweeping = true;
    void sweepAbandonedRequests(ctx)
      .catch((err: unknown) => ctx.log.warn({ err }, 'gateway: abandoned request sweep failed'))
      .finally(() => (sweeping = false));
  }, 1_000);
  abandoned.unref();
  app.addHook('onClose', async () => {
    clearInterval(sweeper);
    clearInterval(abandoned);
  });
  await app.register(multipart, {
    limits: { fileSize: MAX_AUDIO_BYTES, files: 1, fields: 20, fieldSize: 64 * 1024, parts: 30 },
  });
  app.addSchema(SvcNode);
  app.addSchema(GatewayRequestRecord);
  app.get(
    '/api/v1/gateway/requests',
    {
      config: { auth: { permission: 'jobs:read' } },
      schema: {
        summary: "Your organization's gateway requests, newest first: model, node, country, receipt, charge",
        tags,
        querystring: GatewayRequestListQuery,
        response: { 200: GatewayRequestListResponse },
      },
    },
    async (request) => listRequests(ctx, principalOf(request), request.query),
  );
  app.addSchema(GatewayRequestDetail);
  app.get(
    '/api/v1/gateway/requests/:id',
    {
      // An image answer's URLs are presigned afresh: capability URLs, not to be cached.
      config: { auth: { permission: 'jobs:read' }, noStore: true },
      schema: {
        summary:
          'One gateway request with its stored answer (chat completion, embeddings, transcription, or freshly presigned image URLs), to fetch again an answer lost on the way. Results are kept until deleted by hand: nothing expires them today (docs/gateway.md)',
        tags,
        params: GatewayRequestParams,
        response: { 200: Type.Ref(GatewayRequestDetail) },
      },
    },
    async (request) => getRequest(ctx, principalOf(request), request.params.id),
  );
  app.addSchema(ChatSource);

  app.get(
    '/v1/models',
    {
      config: { auth: { permission: 'models:read' } },
      schema: { summary: 'The model catalogue (OpenAI list shape)', tags, response: { 200: ModelList } },
    },
    async () => listModels(),
  );

  app.post(
    '/v1/chat/completions',
    {
      config: inference,
      schema: {
        summary: 'Chat completion (OpenAI format); `stream: true` answers Server-Sent Events of chat.completion.chunk',
        tags,
        body: ChatCompletionRequest,
        produces: ['application/json', 'text/event-stream'],
        response: { 200: ChatCompletion },
      },
    },
    async (request, reply) => {
      hop('gateway.handler');
      const call = await ctx.grounding.groundChat(ctx, principalOf(request), prepareChat(request.body));
      if (call.stream) {
        await streamChat(ctx, principalOf(request), call, reply);
        if (!reply.sent) void reply.hijack(); // the client left before the first byte
        return reply;
      }
      const created = Math.floor(Date.now() / 1000);
      const done = await runRequest(ctx, principalOf(request), call);
      hop('gateway.answer');
      served(reply, done, call.id);
      return chatCompletionView(call, done, created);
    },
  );

  app.post(
    '/v1/embeddings',
    {
      config: inference,
      schema: {
        summary: 'Embeddings of one text or up to 2048 (OpenAI format)',
        tags,
        body: EmbeddingsRequest,
        response: { 200: EmbeddingsResponse },
      },
    },
    async (request, reply) => {
      const call = prepareEmbeddings(request.body);
      const done = await runRequest(ctx, principalOf(request), call);
      served(reply, done, call.id);
      return embeddingsView(call, done);
    },
  );

  app.post(
    '/v1/audio/transcriptions',
    {
      config: inference,
      bodyLimit: MAX_AUDIO_BYTES + 1024 * 1024,
      // A form only: read from the stream in the handler, the schema documents it (platform/route-validation.ts).
      schema: {
        summary:
          'Transcribe audio (multipart/form-data; wav, mp3, flac, ogg, m4a, webm up to 25 MiB, measured and billed by the server)',
        tags,
        consumes: ['multipart/form-data'],
        body: TranscriptionForm,
        produces: ['application/json', 'text/plain'],
        response: {
          200: Type.Union([
            TranscriptionResponse,
            Type.Unsafe<string | Buffer>({ type: 'string', description: 'plain text with response_format=text' }),
          ]),
        },
      },
    },
    async (request, reply) => {
      const { fields, file } = await readAudioForm(request);
      const call = await prepareTranscription(fields, file);
      const done = await runRequest(ctx, principalOf(request), call);
      served(reply, done, call.id);
      const view = transcriptionView(call, done);
      if (typeof view === 'string') return reply.type('text/plain; charset=utf-8').send(Buffer.from(view, 'utf8'));
      return view;
    },
  );

  app.post(
    '/v1/images/generations',
    {
      config: { ...inference, noStore: true },
      schema: {
        summary: 'Generate images; answers presigned URLs valid for an hour',
        tags,
        body: ImageRequest,
        response: { 200: ImageResponse },
      },
    },
    async (request, reply) => {
      const call = prepareImages(request.body);
      const created = Math.floor(Date.now() / 1000);
      const done = await runRequest(ctx, principalOf(request), call);
      served(reply, done, call.id);
      return imagesView(ctx, call, done, created);
    },
  );

  app.get(
    '/v1/files/:name',
    {
      config: { auth: { public: true } },
      schema: {
        summary: 'A generated file, by its presigned URL (no key; 403 when expired or altered)',
        tags,
        params: Type.Object({ name: Type.String({ maxLength: 200 }) }),
        querystring: Type.Object({
          expires: Type.Optional(Type.String({ maxLength: 20 })),
          signature: Type.Optional(Type.String({ maxLength: 128 })),
        }),
        produces: ['image/png', 'application/octet-stream'],
        response: { 200: Type.Unsafe<Buffer>({ type: 'string', format: 'binary', description: 'the file bytes' }) },
      },
    },
    async (request, reply) => {
      const check = checkFileUrl(ctx, request.params.name, request.query);
      if (check === 'expired') throw new ApiError('forbidden', 'this file URL has expired');
      if (check !== 'ok')
        throw new ApiError('forbidden', 'this file URL is not valid (missing, altered or for another file)');
      const blob = await ctx.blobs.get(fileBlobKey(request.params.name));
      if (!blob) throw new ApiError('not_found', `file ${request.params.name} not found`);
      return reply.type(blob.contentType).header('cache-control', 'private, max-age=3600').send(blob.bytes);
    },
  );
}

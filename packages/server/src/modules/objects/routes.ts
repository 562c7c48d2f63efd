import type { IncomingMessage } from 'node:http';
import { finished, Transform, type Readable } from 'node:stream';
import { Type } from '@sinclair/typebox';
import type { App } from '../../app.js';
import type { PlatformServices } from '../../platform/services.js';
import { ApiError } from '../../platform/errors.js';
import { checkObjectUrl, type ObjectMethod, type ObjectUrlQuery } from '../../platform/objects/presign.js';

const tags = ['objects'];
const Query = Type.Object({
  method: Type.Optional(Type.String({ maxLength: 8 })),
  expires: Type.Optional(Type.String({ maxLength: 20 })),
  max_bytes: Type.Optional(Type.String({ maxLength: 20 })),
  signature: Type.Optional(Type.String({ maxLength: 128 })),
});
const Params = Type.Object({
  key: Type.String({ maxLength: 1024, description: 'the object key, URL-encoded as one segment (a / as %2F)' }),
});

/** Refuses a URL that is not a valid, unexpired presigned URL for `method` and `key`. */
function allow(ctx: PlatformServices, method: ObjectMethod, key: string, query: ObjectUrlQuery): number | undefined {
  const check = checkObjectUrl(ctx, method, key, query);
  if (check.status === 'expired') throw new ApiError('forbidden', 'this object URL has expired');
  if (check.status !== 'ok')
    throw new ApiError(
      'forbidden',
      `this object URL is not valid for ${method} (missing, altered or for another object)`,
    );
  return check.maxBytes;
}

const tooLarge = (maxBytes: number) =>
  // The rest of the body is not read: the connection closes after the answer.
  new ApiError('payload_too_large', `this URL takes at most ${maxBytes} bytes`, undefined, { connection: 'close' });

/**
 * A PUT's body as the store reads it, failing with `payload_too_large` past `maxBytes`. Its errors
 * are heard from the moment it exists: the store may still be making a directory when the first
 * chunk arrives already too large, and an `error` nobody listens to ends the process. The request
 * is piped rather than passed through stream.pipeline, which would destroy it (its socket) before
 * the 413 could be sent; a request that ends early (the client gone) fails the body instead.
 * `refusal` is the size error, if that is how the body ended.
 */
function limitedBody(raw: IncomingMessage, maxBytes: number | undefined): { stream: Readable; refusal(): unknown } {
  let seen = 0;
  let refusal: ApiError | undefined;
  const stream = new Transform({
    transform(chunk: Buffer, _enc, done) {
      seen += chunk.length;
      if (maxBytes !== undefined && seen > maxBytes) done((refusal = tooLarge(maxBytes)));
      else done(null, chunk);
    },
  });
  // pipe() unpipes on the body's error itself; this listener is there so the error is heard.
  stream.on('error', () => raw.unpipe(stream));
  finished(raw, (err) => {
    if (err) stream.destroy(err);
  });
  raw.pipe(stream);
  return { stream, refusal: () => refusal };
}

/**
 * Objects by presigned URL (platform/objects/presign.ts), with no key: a node downloads a capture
 * set's files and uploads its outputs here, whichever object store runs underneath.
 */
export async function objectRoutes(app: App, ctx: PlatformServices): Promise<void> {
  await app.register(async (scope) => {
    // A PUT's body is the object itself, of any type: streamed to the store, never parsed.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (_request, _payload, done) => done(null));
    const config = { auth: { public: true as const } };
    scope.get(
      '/api/v1/objects/:key',
      {
        config,
        schema: {
          summary: 'An object, by its presigned URL (no key; 403 when expired or altered)',
          tags,
          params: Params,
          querystring: Query,
          produces: ['application/octet-stream'],
          response: { 200: Type.Unsafe<Buffer>({ type: 'string', format: 'binary', description: 'the object bytes' }) },
        },
      },
      async (request, reply) => {
        const { key } = request.params as { key: string };
        allow(ctx, 'GET', key, request.query as ObjectUrlQuery);
        const stat = await ctx.objects.stat(key);
        const stream = stat ? await ctx.objects.read(key) : undefined;
        if (!stat || !stream) throw new ApiError('not_found', 'object not found');
        return reply
          .type(stat.contentType ?? 'application/octet-stream')
          .header('content-length', String(stat.bytes))
          .header('cache-control', 'private, no-store')
          .send(stream);
      },
    );
    scope.put(
      '/api/v1/objects/:key',
      {
        config,
        schema: {
          summary: 'Store an object, by its presigned PUT URL (at most its max_bytes)',
          tags,
          params: Params,
          querystring: Query,
          response: { 200: Type.Object({ key: Type.String(), bytes: Type.Integer() }) },
        },
      },
      async (request) => {
        const { key } = request.params as { key: string };
        const maxBytes = allow(ctx, 'PUT', key, request.query as ObjectUrlQuery);
        const declared = Number(request.headers['content-length'] ?? Number.NaN);
        if (maxBytes !== undefined && declared > maxBytes) throw tooLarge(maxBytes);
        const body = limitedBody(request.raw, maxBytes);
        const contentType = request.headers['content-type'];
        try {
          const { bytes } = await ctx.objects.put(
            key,
            body.stream,
            typeof contentType === 'string' ? contentType : undefined,
          );
          return { key, bytes };
        } catch (err) {
          throw body.refusal() ?? err;
        }
      },
    );
  });
}

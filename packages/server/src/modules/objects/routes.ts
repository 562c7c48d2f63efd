import { Transform } from 'node:stream';
import { Type } from '@sinclair/typebox';
import type { App } from '../../app.js';
import type { ServiceContext } from '../../context.js';
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
function allow(ctx: ServiceContext, method: ObjectMethod, key: string, query: ObjectUrlQuery): number | undefined {
  const check = checkObjectUrl(ctx, method, key, query);
  if (check.status === 'expired') throw new ApiError('forbidden', 'this object URL has expired');
  if (check.status !== 'ok')
    throw new ApiError(
      'forbidden',
      `this object URL is not valid for ${method} (missing, altered or for another object)`,
    );
  return check.maxBytes;
}

/**
 * Objects by presigned URL (platform/objects/presign.ts), with no key: a node downloads a capture
 * set's files and uploads its outputs here, whichever object store runs underneath.
 */
export async function objectRoutes(app: App, ctx: ServiceContext): Promise<void> {
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
        if (maxBytes !== undefined && declared > maxBytes)
          throw new ApiError('payload_too_large', `this URL takes at most ${maxBytes} bytes`);
        let seen = 0;
        const limit = new Transform({
          transform(chunk: Buffer, _enc, done) {
            seen += chunk.length;
            if (maxBytes !== undefined && seen > maxBytes)
              done(new ApiError('payload_too_large', `this URL takes at most ${maxBytes} bytes`));
            else done(null, chunk);
          },
        });
        const contentType = request.headers['content-type'];
        const { bytes } = await ctx.objects.put(
          key,
          request.raw.pipe(limit),
          typeof contentType === 'string' ? contentType : undefined,
        );
        return { key, bytes };
      },
    );
  });
}

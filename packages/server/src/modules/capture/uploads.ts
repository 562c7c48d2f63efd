import { mkdirSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { FileStore } from '@tus/file-store';
import { S3Store } from '@tus/s3-store';
import { EVENTS, Server, type DataStore } from '@tus/server';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { App } from '../../app.js';
import type { PlatformServices } from '../../platform/services.js';
import { ApiError, codeForStatus } from '../../platform/errors.js';
import type { ObjectStore } from '../../platform/objects/index.js';
import { principalOf } from '../../platform/principal.js';
import { CAPTURE_SET_ID } from './schemas.js';
import * as service from './service.js';
import type { CaptureSetRow } from './store.js';
import { createUploadLocker, tusErrorResponse } from './upload-locks.js';

/**
 * Resumable uploads (the tus protocol, https://tus.io) at /api/v1/capture-sets/{id}/uploads: one
 * upload per manifest file, named by `path` in Upload-Metadata, its Upload-Length equal to the
 * manifest's size. The bytes go to the object store (a directory or S3) under the upload's id,
 * where `complete` reads them back. Authentication and tenancy are the API's own: the route's
 * auth hook runs first, then the set is looked up in the caller's organization.
 */

const UPLOAD_ID = /^cs_[0-9a-z]{26}-[0-9a-f]{32}$/;
const TUS_HEADERS = [
  'tus-resumable',
  'tus-version',
  'tus-extension',
  'tus-max-size',
  'upload-offset',
  'upload-length',
  'location',
  'cache-control',
  'upload-expires',
];

/** The tus datastore writing where `objects` reads: the same directory, or the same bucket. */
function tusStore(objects: ObjectStore): DataStore {
  const where = objects.location;
  if (where.kind === 'local') {
    mkdirSync(where.root, { recursive: true });
    return new FileStore({ directory: where.root });
  }
  return new S3Store({
    s3ClientConfig: {
      bucket: where.bucket,
      region: where.region,
      forcePathStyle: where.forcePathStyle,
      // The SDK's default streams parts as aws-chunked with a checksum trailer, which S3-compatible
      // servers other than AWS (s3rver, older MinIO and Ceph) store framing and all: send plain bodies.
      requestChecksumCalculation: 'WHEN_REQUIRED',
      ...(where.endpoint ? { endpoint: where.endpoint } : {}),
      ...(where.credentials ? { credentials: where.credentials } : {}),
    },
  });
}

/** What the route knew about a request before tus saw it. */
interface UploadCall {
  set: CaptureSetRow;
}

export async function captureUploadRoutes(app: App, ctx: PlatformServices): Promise<void> {
  const calls = new WeakMap<Request, UploadCall>();
  const callOf = (req: Request): UploadCall => {
    const call = calls.get(req);
    if (!call) throw { status_code: 500, body: 'upload request without its capture set' };
    return call;
  };
  // One lock per upload shared by every instance, so a client may resume on any of them.
  const locks = await createUploadLocker({ db: ctx.db, bus: ctx.bus, log: ctx.log });
  app.addHook('onClose', async () => locks.close());
  // Built at the first upload: FileStore's constructor starts an un-awaited mkdir that throws from
  // its callback, which must not outlive an app closed before any upload (and its data dir removed).
  let built: { tus: Server; datastore: DataStore } | undefined;
  const tusServer = () => (built ??= createTus());
  const createTus = () => {
    const datastore = tusStore(ctx.objects);
    const tus = new Server({
      path: '/api/v1/capture-sets/uploads',
      datastore,
      locker: locks.locker,
      onResponseError: (_req, err) => tusErrorResponse(err),
      relativeLocation: true,
      postReceiveInterval: 500,
      namingFunction: (req) => `${callOf(req).set.id}-${randomBytes(16).toString('hex')}`,
      generateUrl: (req, { id }) => `/api/v1/capture-sets/${callOf(req).set.id}/uploads/${id}`,
      getFileIdFromRequest: (req, lastPath) => {
        // An upload belongs to the set in its URL: another set's upload id is not found here.
        if (!lastPath || !UPLOAD_ID.test(lastPath) || !lastPath.startsWith(`${callOf(req).set.id}-`)) return undefined;
        return lastPath;
      },
      async onUploadCreate(req, upload) {
        const path = upload.metadata?.path ?? upload.metadata?.relativePath ?? undefined;
        try {
          const { replaced } = await service.beginUpload(ctx, callOf(req).set, {
            id: upload.id,
            path: path ?? undefined,
            size: upload.size,
          });
          if (replaced)
            await ctx.objects
              .delete(replaced)
              .catch((err: unknown) =>
                ctx.log.warn({ err, upload_id: replaced }, 'could not remove a replaced upload'),
              );
        } catch (err) {
          if (err instanceof ApiError) throw { status_code: err.status, body: err.message };
          throw err;
        }
        return {};
      },
      async onUploadFinish(req, upload) {
        await service.recordProgress(ctx, callOf(req).set.id, upload.id, upload.offset);
        return {};
      },
    });
    tus.on(EVENTS.POST_RECEIVE, (req, upload) => {
      const call = calls.get(req);
      if (call)
        void service
          .recordProgress(ctx, call.set.id, upload.id, upload.offset)
          .catch((err: unknown) => ctx.log.warn({ err }, 'could not record upload progress'));
    });
    return { tus, datastore };
  };

  async function handle(request: FastifyRequest<{ Params: { id: string } }>, reply: FastifyReply) {
    const set = await service.uploadTarget(ctx, principalOf(request), request.params.id);
    const raw = request.raw;
    // Only file bytes are handed to tus as a stream; any other body was already parsed (and tus refuses it).
    const hasBody =
      (request.method === 'PATCH' || request.method === 'POST') &&
      request.headers['content-type'] === 'application/offset+octet-stream';
    // The first byte of any file moves the set to uploading (DESIGN.md section 14).
    if (hasBody && set.status === 'pending_upload' && Number(request.headers['content-length'] ?? 1) > 0)
      await service.markUploading(ctx, set.id);
    const headers = new Headers();
    for (const [name, value] of Object.entries(raw.headers)) if (typeof value === 'string') headers.set(name, value);
    const webRequest = new Request(`http://upload.invalid${request.url}`, {
      method: request.method,
      headers,
      ...(hasBody ? { body: Readable.toWeb(raw) as ReadableStream, duplex: 'half' } : {}),
    } as RequestInit);
    calls.set(webRequest, { set });
    let response: Response;
    const { tus, datastore } = tusServer();
    try {
      response = await tus.handleWeb(webRequest);
    } finally {
      // However a PATCH ended (done, or the connection cut), what was stored is where a resume starts.
      const uploadId = (request.params as { upload_id?: string }).upload_id;
      if (request.method === 'PATCH' && uploadId && UPLOAD_ID.test(uploadId) && uploadId.startsWith(`${set.id}-`)) {
        await datastore.getUpload(uploadId).then(
          (u) => service.recordProgress(ctx, set.id, uploadId, u.offset),
          (err: unknown) => ctx.log.warn({ err, upload_id: uploadId }, 'could not read an upload offset'),
        );
      }
    }
    const out: Record<string, string> = {};
    response.headers.forEach((value, name) => {
      if (TUS_HEADERS.includes(name) || name === 'access-control-expose-headers') out[name] = value;
    });
    if (response.status >= 400) {
      // tus answers in plain text; the API answers every error in its own shape.
      const text = (await response.text()).trim();
      throw new ApiError(codeForStatus(response.status), text || `upload refused (${response.status})`, undefined, out);
    }
    return reply
      .code(response.status)
      .headers(out)
      .send(response.status === 204 || request.method === 'HEAD' ? undefined : await response.text());
  }

  await app.register(async (scope) => {
    // tus sends file bytes as application/offset+octet-stream: left unread for tus to stream.
    scope.addContentTypeParser('application/offset+octet-stream', (_request, _payload, done) => done(null));
    const config = { auth: { permission: 'capture_sets:write' as const } };
    const tags = ['capture sets'];
    const params = {
      type: 'object',
      properties: { id: { type: 'string', pattern: CAPTURE_SET_ID } },
      required: ['id'],
    };
    const fileParams = {
      type: 'object',
      properties: { id: { type: 'string', pattern: CAPTURE_SET_ID }, upload_id: { type: 'string', maxLength: 100 } },
      required: ['id', 'upload_id'],
    };
    scope.post(
      '/api/v1/capture-sets/:id/uploads',
      {
        config,
        schema: {
          summary: 'tus: create an upload for one manifest file (Upload-Length, Upload-Metadata path)',
          tags,
          params,
        },
      },
      handle,
    );
    for (const method of ['HEAD', 'PATCH'] as const) {
      scope.route({
        method,
        url: '/api/v1/capture-sets/:id/uploads/:upload_id',
        config,
        schema: {
          summary:
            method === 'HEAD' ? "tus: an upload's offset (to resume from)" : 'tus: append bytes at Upload-Offset',
          tags,
          params: fileParams,
        },
        handler: handle,
      });
    }
  });
}

import { usageCostMicro } from '@svc/protocol';
import type { Static } from '@sinclair/typebox';
import type { ServiceContext } from '../../service-context.js';
import { ApiError } from '../../platform/errors.js';
import { fileBlobKey, presignFileUrl } from './files.js';
import type { ImageRequest } from './schemas.js';
import { requestId, svcNode, type Finished, type GatewayCall } from './service.js';
import { requireModel } from './models.js';

export interface ImageCall extends GatewayCall {
  n: number;
  responseFormat: 'url' | 'b64_json';
}

/** Each side of `size` (DESIGN.md section 10). */
export const MIN_IMAGE_SIDE = 64;
export const MAX_IMAGE_SIDE = 1024;

const bad = (path: string, message: string) =>
  new ApiError('invalid_request', `${path.slice(1)} ${message}`, [{ path, message }]);

/**
 * Turns a validated `POST /v1/images/generations` body into a gateway call: `n` 1..10 (default
 * 1), `size` `WxH` with each side 64..1024 (default 1024x1024), 0.03 CAD per image.
 *
 * @example
 * prepareImages({ model: 'sdxl-turbo', prompt: 'a red fox', n: 2, size: '256x256' }).maxMicro; // 60_000
 */
export function prepareImages(body: Static<typeof ImageRequest>): ImageCall {
  const model = requireModel(body.model, 'image');
  const size = body.size ?? '1024x1024';
  const [width = 0, height = 0] = size.split('x').map(Number);
  if ([width, height].some((side) => side < MIN_IMAGE_SIDE || side > MAX_IMAGE_SIDE))
    throw bad('/size', `must be WxH with each side from ${MIN_IMAGE_SIDE} to ${MAX_IMAGE_SIDE}`);
  const n = body.n ?? 1;
  return {
    id: requestId('img'),
    type: 'image',
    model: model.id,
    payload: { model: model.id, prompt: body.prompt, n, size: `${width}x${height}` },
    stream: false,
    route: {
      jurisdiction: body.jurisdiction ?? undefined,
      strict_jurisdiction: body.strict_jurisdiction ?? undefined,
      requires_tee: body.requires_tee ?? undefined,
    },
    maxMicro: usageCostMicro(model.id, { images: n }),
    n,
    responseFormat: body.response_format === 'b64_json' ? 'b64_json' : 'url',
  };
}

const EXTENSIONS: Record<string, string> = {
  'image/png': 'png',
  'image/jpeg': 'jpg',
  'image/webp': 'webp',
  'image/gif': 'gif',
};

/** The images of a node's image result (`{images: [{content_type, b64_json}]}`); 502 when there are none. */
export function nodeImages(output: Buffer): { content_type?: string; b64_json: string }[] {
  let parsed: { images?: { content_type?: string; b64_json?: string }[] };
  try {
    parsed = JSON.parse(output.toString('utf8')) as typeof parsed;
  } catch {
    throw new ApiError('upstream_error', 'the node returned an image result that is not JSON');
  }
  const images = (Array.isArray(parsed.images) ? parsed.images : []).filter(
    (i): i is { content_type?: string; b64_json: string } => typeof i.b64_json === 'string' && i.b64_json.length > 0,
  );
  if (images.length === 0) throw new ApiError('upstream_error', 'the node returned no image');
  return images;
}

/**
 * Stores the request's images as served files (`<request id>-<index>.<ext>`) and returns fresh
 * presigned URLs. Idempotent: the same names and bytes each time, so the answer can be rebuilt
 * from the stored result after a crash (GET /api/v1/gateway/requests/{id}).
 */
export async function storeImageFiles(
  ctx: ServiceContext,
  requestId: string,
  images: { content_type?: string; b64_json: string }[],
): Promise<{ url: string }[]> {
  return Promise.all(
    images.map(async (image, index) => {
      const contentType =
        image.content_type && EXTENSIONS[image.content_type] ? image.content_type : 'application/octet-stream';
      const name = `${requestId}-${index}.${EXTENSIONS[contentType] ?? 'bin'}`;
      await ctx.blobs.put(fileBlobKey(name), Buffer.from(image.b64_json, 'base64'), contentType);
      return { url: presignFileUrl(ctx, name) };
    }),
  );
}

/**
 * Stores the node's images in the blob store and answers OpenAI's `{created, data: [{url}]}`
 * with presigned URLs (or `b64_json` when asked).
 */
export async function imagesView(ctx: ServiceContext, call: ImageCall, done: Finished, created: number) {
  const images = nodeImages(done.output);
  const data =
    call.responseFormat === 'b64_json'
      ? images.map((image) => ({ b64_json: image.b64_json }))
      : await storeImageFiles(ctx, call.id, images);
  return { created, id: call.id, data, svc_node: svcNode(done.attempt.node), svc_receipt_id: done.receiptId };
}

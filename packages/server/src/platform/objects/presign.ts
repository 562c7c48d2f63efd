import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Config } from '../config.js';
import type { PlatformSecrets } from '../secrets.js';
import { assertObjectKey, type ObjectStore } from './interface.js';

/**
 * Presigned object URLs: `${publicUrl}/api/v1/objects/<key, URL-encoded>?method=GET|PUT&expires=<unix s>
 * [&max_bytes=N]&signature=<hex HMAC-SHA256>`, served by the server from the object store (a
 * directory or S3), so a node can fetch a capture set's files and send its outputs with no key.
 * The HMAC key is derived from the platform's session secret: every instance signs alike.
 */

export type ObjectMethod = 'GET' | 'PUT';

type Signer = { secrets: Pick<PlatformSecrets, 'sessionSecret'>; config: Pick<Config, 'publicUrl'> };

function signature(
  secrets: Pick<PlatformSecrets, 'sessionSecret'>,
  method: ObjectMethod,
  key: string,
  expires: number,
  maxBytes: number | undefined,
): string {
  const urlKey = createHmac('sha256', secrets.sessionSecret).update('svc-object-urls-v1').digest();
  return createHmac('sha256', urlKey)
    .update(`${method}\n${key}\n${expires}\n${maxBytes ?? ''}`)
    .digest('hex');
}

/**
 * A URL that lets its holder GET (or PUT, up to `maxBytes`) one object until `expiresAt`.
 *
 * @example
 * presignObjectUrl(ctx, { method: 'GET', key: 'cs_1-ab12', ttlSeconds: 3600 })
 */
export function presignObjectUrl(
  ctx: Signer,
  options: { method: ObjectMethod; key: string; ttlSeconds: number; maxBytes?: number; now?: number },
): string {
  assertObjectKey(options.key);
  const expires = Math.floor((options.now ?? Date.now()) / 1000) + options.ttlSeconds;
  const path = encodeURIComponent(options.key);
  const max = options.maxBytes === undefined ? '' : `&max_bytes=${options.maxBytes}`;
  return `${ctx.config.publicUrl}/api/v1/objects/${path}?method=${options.method}&expires=${expires}${max}&signature=${signature(ctx.secrets, options.method, options.key, expires, options.maxBytes)}`;
}

export interface ObjectUrlQuery {
  method?: string | undefined;
  expires?: string | undefined;
  max_bytes?: string | undefined;
  signature?: string | undefined;
}

/** Checks a presigned object URL for `method`: ok (with its size limit for a PUT), expired, or invalid. Constant-time on the signature. */
export function checkObjectUrl(
  ctx: Pick<Signer, 'secrets'>,
  method: ObjectMethod,
  key: string,
  query: ObjectUrlQuery,
  now = Date.now(),
): { status: 'ok'; maxBytes: number | undefined } | { status: 'expired' | 'invalid' } {
  const { expires, signature: given } = query;
  if (query.method !== method || !expires || !/^\d{1,12}$/.test(expires) || !given || !/^[0-9a-f]{64}$/.test(given))
    return { status: 'invalid' };
  if (query.max_bytes !== undefined && !/^\d{1,16}$/.test(query.max_bytes)) return { status: 'invalid' };
  try {
    assertObjectKey(key);
  } catch {
    return { status: 'invalid' };
  }
  const maxBytes = query.max_bytes === undefined ? undefined : Number(query.max_bytes);
  const expected = Buffer.from(signature(ctx.secrets, method, key, Number(expires), maxBytes), 'hex');
  if (!timingSafeEqual(expected, Buffer.from(given, 'hex'))) return { status: 'invalid' };
  return Number(expires) * 1000 < now ? { status: 'expired' } : { status: 'ok', maxBytes };
}

/**
 * The URL a client (a node) uses to GET or PUT one object: the object store's own presigned URL
 * when it has them (S3, through the SDK's presigner), else one signed by this server and served
 * at /api/v1/objects/ (a directory store). A PUT signed here takes at most `maxBytes`; one signed
 * by S3 takes any size, and what arrives is checked against its manifest afterwards anyway.
 *
 * @example
 * await objectUrl(ctx, { method: 'GET', key: upload.id, ttlSeconds: 3600 })
 */
export async function objectUrl(
  ctx: Signer & { objects: Pick<ObjectStore, 'presign'> },
  options: { method: ObjectMethod; key: string; ttlSeconds: number; maxBytes?: number },
): Promise<string> {
  if (ctx.objects.presign) return ctx.objects.presign(options.method, options.key, options.ttlSeconds);
  return presignObjectUrl(ctx, options);
}

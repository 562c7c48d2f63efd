import { createHmac, timingSafeEqual } from 'node:crypto';
import type { ServiceContext } from '../../service-context.js';

/**
 * Presigned file URLs (DESIGN.md section 10): `${publicUrl}/v1/files/<name>?expires=<unix s>&
 * signature=<hex HMAC-SHA256 over "<name>\n<expires>">`. The HMAC key is derived from the
 * platform's session secret, so every instance sharing the database signs alike. Files live in
 * the blob store under `files/<name>`.
 */

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$/;

/** The key that signs file URLs: HMAC-SHA256(session secret, "svc-file-urls-v1"). */
function urlKey(ctx: Pick<ServiceContext, 'secrets'>): Buffer {
  return createHmac('sha256', ctx.secrets.sessionSecret).update('svc-file-urls-v1').digest();
}

function signature(ctx: Pick<ServiceContext, 'secrets'>, name: string, expires: number): string {
  return createHmac('sha256', urlKey(ctx)).update(`${name}\n${expires}`).digest('hex');
}

/** The blob key of a served file. */
export function fileBlobKey(name: string): string {
  if (!NAME.test(name)) throw new Error(`unsafe file name ${JSON.stringify(name)}`);
  return `files/${name}`;
}

/**
 * A presigned URL for a stored file, valid until `expiresAt` (unix seconds; default now plus
 * `SVC_FILE_URL_TTL_SECONDS`, one hour).
 *
 * @example
 * presignFileUrl(ctx, 'img-01jd...-0.png'); // 'https://svc.example/v1/files/img-01jd...-0.png?expires=...&signature=...'
 */
export function presignFileUrl(
  ctx: Pick<ServiceContext, 'secrets' | 'config'>,
  name: string,
  expiresAt?: number,
): string {
  const expires = expiresAt ?? Math.floor(Date.now() / 1000) + ctx.config.fileUrlTtlSeconds;
  return `${ctx.config.publicUrl}/v1/files/${encodeURIComponent(name)}?expires=${expires}&signature=${signature(ctx, name, expires)}`;
}

/**
 * Checks a presigned URL's query: `ok`, `expired`, or `invalid` (missing, malformed or altered
 * name, expiry or signature). Constant-time on the signature.
 */
export function checkFileUrl(
  ctx: Pick<ServiceContext, 'secrets'>,
  name: string,
  query: { expires?: string; signature?: string },
  now = Date.now(),
): 'ok' | 'expired' | 'invalid' {
  const { expires, signature: given } = query;
  if (!NAME.test(name) || !expires || !/^\d{1,12}$/.test(expires) || !given || !/^[0-9a-f]{64}$/.test(given))
    return 'invalid';
  const expected = Buffer.from(signature(ctx, name, Number(expires)), 'hex');
  if (!timingSafeEqual(expected, Buffer.from(given, 'hex'))) return 'invalid';
  return Number(expires) * 1000 < now ? 'expired' : 'ok';
}

import { firstRefused, guardedDispatcher } from '@svc/protocol/egress';
import { fetch as undiciFetch, type Dispatcher } from 'undici';
import { callSignal } from '../call-signal.js';
import { WorkError } from './types.js';

/** Limits on a `payload_url` download (audio for kind 3). */
export const PAYLOAD_FETCH_TIMEOUT_MS = 60_000;
export const PAYLOAD_MAX_BYTES = 25 * 1024 * 1024;

/** Refuses hosts that resolve to anything but public unicast, judged at connect time (one dispatcher per process). */
let guarded: Dispatcher | undefined;
function publicOnly(): Dispatcher {
  guarded ??= guardedDispatcher({
    refuse: (host, addresses) => {
      const verdict = firstRefused(addresses);
      return verdict
        ? new WorkError(
            `payload_url host ${host} is not a public address (${verdict.address}: ${verdict.reason}); the node refuses to fetch it`,
            false,
          )
        : undefined;
    },
  });
  return guarded;
}

export interface FetchPayloadOptions {
  signal: AbortSignal;
  /** Replaces the download (tests); the address guard is then the caller's. */
  fetch?: typeof fetch;
  /** The control plane's origin: its presigned URLs may live on a private network. */
  trustedOrigin?: string;
  timeoutMs?: number;
  maxBytes?: number;
}

/**
 * Downloads a buyer-supplied `payload_url`: http(s) only, no redirects, at most `maxBytes`
 * (25 MiB) within `timeoutMs` (60 s). Unless the URL is on the control plane's own origin, every
 * address its host resolves to must be public unicast, judged at connect time by the platform's
 * egress policy (`@svc/protocol/egress`: IPv6 forms that embed IPv4 are judged by the IPv4 inside),
 * so a buyer cannot make the node probe the operator's network. Failures are {@link WorkError}s.
 *
 * @example
 * const audio = await fetchPayload(payload.payload_url, { signal, trustedOrigin: server });
 */
export async function fetchPayload(rawUrl: unknown, options: FetchPayloadOptions): Promise<Buffer> {
  const { signal, timeoutMs = PAYLOAD_FETCH_TIMEOUT_MS, maxBytes = PAYLOAD_MAX_BYTES } = options;
  let url: URL;
  try {
    url = new URL(typeof rawUrl === 'string' ? rawUrl : '');
  } catch {
    throw new WorkError('payload.payload_url must be an absolute http(s) URL', false);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new WorkError('payload.payload_url must be http(s)', false);
  const trusted =
    options.trustedOrigin !== undefined &&
    URL.canParse(options.trustedOrigin) &&
    url.origin === new URL(options.trustedOrigin).origin;

  const call = callSignal(timeoutMs, [signal]);
  try {
    const res = options.fetch
      ? await options.fetch(url, { signal: call.signal, redirect: 'error' })
      : await undiciFetch(url, {
          signal: call.signal,
          redirect: 'error',
          ...(trusted ? {} : { dispatcher: publicOnly() }),
        });
    if (!res.ok)
      throw new WorkError(`payload_url answered HTTP ${res.status}`, res.status === 429 || res.status >= 500);
    const declared = Number(res.headers.get('content-length') ?? Number.NaN);
    if (declared > maxBytes) throw new WorkError(`payload_url is larger than ${maxBytes} bytes`, false);
    const chunks: Buffer[] = [];
    let size = 0;
    if (res.body !== null) {
      for await (const chunk of res.body) {
        size += chunk.byteLength;
        if (size > maxBytes) throw new WorkError(`payload_url is larger than ${maxBytes} bytes`, false);
        chunks.push(Buffer.from(chunk));
      }
    }
    return Buffer.concat(chunks);
  } catch (err) {
    if (signal.aborted) throw err;
    if (err instanceof WorkError) throw err;
    // undici wraps a refused connection in "fetch failed": the refusal is among its causes.
    for (let cause: unknown = err, depth = 0; cause instanceof Error && depth < 5; cause = cause.cause, depth++)
      if (cause instanceof WorkError) throw cause;
    if (call.timedOut()) throw new WorkError(`payload_url did not download within ${timeoutMs} ms`, true);
    throw new WorkError(`cannot fetch payload_url: ${err instanceof Error ? err.message : String(err)}`, true);
  } finally {
    call.done();
  }
}

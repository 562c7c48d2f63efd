import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';
import { WorkError } from './types.js';

/** Limits on a `payload_url` download (audio for kind 3). */
export const PAYLOAD_FETCH_TIMEOUT_MS = 60_000;
export const PAYLOAD_MAX_BYTES = 25 * 1024 * 1024;

const PRIVATE = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.168.0.0', 16],
  ['224.0.0.0', 3],
] as const) {
  PRIVATE.addSubnet(net, prefix, 'ipv4');
}
for (const [net, prefix] of [
  ['::', 127],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
] as const)
  PRIVATE.addSubnet(net, prefix, 'ipv6');

/** True for loopback, private, link-local, CGNAT, multicast and reserved addresses. */
function isPrivateAddress(address: string): boolean {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1];
  if (mapped !== undefined) return PRIVATE.check(mapped, 'ipv4');
  return PRIVATE.check(address, isIP(address) === 6 ? 'ipv6' : 'ipv4');
}

export interface FetchPayloadOptions {
  signal: AbortSignal;
  fetch?: typeof fetch;
  /** The control plane's origin: its presigned URLs may live on a private network. */
  trustedOrigin?: string;
  timeoutMs?: number;
  maxBytes?: number;
}

/**
 * Downloads a buyer-supplied `payload_url`: http(s) only, no redirects, at most `maxBytes`
 * (25 MiB) within `timeoutMs` (60 s). Unless the URL is on the control plane's own origin, its
 * host must resolve only to public addresses, so a buyer cannot make the node probe the
 * operator's network. Failures are {@link WorkError}s.
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
  if (url.origin !== options.trustedOrigin) await assertPublicHost(url.hostname.replace(/^\[|\]$/g, ''));

  const timeout = AbortSignal.timeout(timeoutMs);
  const combined = AbortSignal.any([signal, timeout]);
  try {
    const res = await (options.fetch ?? fetch)(url, { signal: combined, redirect: 'error' });
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
    if (timeout.aborted) throw new WorkError(`payload_url did not download within ${timeoutMs} ms`, true);
    throw new WorkError(`cannot fetch payload_url: ${err instanceof Error ? err.message : String(err)}`, true);
  }
}

async function assertPublicHost(host: string): Promise<void> {
  let addresses: string[];
  try {
    addresses = isIP(host) === 0 ? (await lookup(host, { all: true })).map((a) => a.address) : [host];
  } catch {
    throw new WorkError(`cannot resolve payload_url host ${host}`, true);
  }
  if (addresses.length === 0 || addresses.some(isPrivateAddress)) {
    throw new WorkError(`payload_url host ${host} is not a public address; the node refuses to fetch it`, false);
  }
}

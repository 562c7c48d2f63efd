import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { ApiError } from './errors.js';

function ipv4Private(ip: string): boolean {
  const [a = 0, b = 0] = ip.split('.').map(Number);
  return (
    a === 0 || a === 10 || a === 127 || (a === 100 && b >= 64 && b <= 127) || (a === 169 && b === 254) ||
    (a === 172 && b >= 16 && b <= 31) || (a === 192 && b === 168) || (a === 198 && (b === 18 || b === 19)) || a >= 224
  );
}

/** True for loopback, private, link-local, CGNAT, multicast, reserved and unspecified addresses. */
export function isPrivateAddress(ip: string): boolean {
  if (isIP(ip) === 4) return ipv4Private(ip);
  const v6 = ip.toLowerCase();
  if (v6.startsWith('::ffff:')) return ipv4Private(v6.slice(7));
  return v6 === '::' || v6 === '::1' || v6.startsWith('fc') || v6.startsWith('fd') || v6.startsWith('fe8') || v6.startsWith('fe9') || v6.startsWith('fea') || v6.startsWith('feb') || v6.startsWith('ff');
}

/**
 * Checks an outbound URL the platform will call (webhooks, payload_url, delivery PUT URLs): http
 * or https only, no credentials in it, and every address its host resolves to public, unless
 * private egress is allowed (`--allow-private-egress`). Throws invalid_request naming `path`.
 */
export async function checkOutboundUrl(raw: string, options: { allowPrivate: boolean; path: string }): Promise<URL> {
  const fail = (why: string) => new ApiError('invalid_request', `${options.path.slice(1)} ${why}`, [{ path: options.path, message: why }]);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw fail('must be an absolute URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw fail('must use http or https');
  if (url.username || url.password) throw fail('must not carry credentials');
  if (options.allowPrivate) return url;
  const host = url.hostname.replace(/^\[|\]$/g, '');
  let addresses: string[];
  try {
    addresses = isIP(host) ? [host] : (await lookup(host, { all: true })).map((a) => a.address);
  } catch {
    throw fail(`host ${host} does not resolve`);
  }
  if (addresses.length === 0 || addresses.some(isPrivateAddress)) throw fail('must not point to a private, loopback or link-local address');
  return url;
}

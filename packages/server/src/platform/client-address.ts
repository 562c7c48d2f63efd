import ipaddr from 'ipaddr.js';

/**
 * Client addresses as rate limits see them. One IPv6 subscriber is routinely given a whole /64
 * (SLAAC, privacy addresses), so counting exact IPv6 addresses would give every caller 2^64
 * buckets; an IPv4 address arriving as IPv4-mapped IPv6 (`::ffff:192.0.2.7`, a dual-stack
 * socket) is the IPv4 client it carries. docs/rate-limits.md ("Client addresses").
 */

/** The named ranges `SVC_TRUST_PROXY` accepts besides addresses and CIDRs (Fastify's, from proxy-addr). */
export const TRUST_PROXY_NAMES = ['loopback', 'linklocal', 'uniquelocal'] as const;

/**
 * The part of a client address a per-address rate limit counts: an IPv4 address as it is, an
 * IPv4-mapped IPv6 address as its IPv4 address, any other IPv6 address as its /64 prefix. A string
 * that is not an address (no socket address at all) is returned as it is.
 *
 * @example
 * addressBucket('2001:db8:1:2:aaaa::1'); // '2001:db8:1:2::/64'
 * addressBucket('::ffff:192.0.2.7'); // '192.0.2.7'
 */
export function addressBucket(address: string): string {
  // A zone index (`fe80::1%eth0`) names the interface, not the client.
  const bare = address.replace(/%.*$/, '');
  if (!ipaddr.isValid(bare)) return address;
  const parsed = ipaddr.parse(bare);
  if (parsed.kind() === 'ipv4') return parsed.toString();
  const v6 = parsed as ipaddr.IPv6;
  if (v6.isIPv4MappedAddress()) return v6.toIPv4Address().toString();
  const prefix = v6.parts.slice(0, 4).concat([0, 0, 0, 0]);
  return `${new ipaddr.IPv6(prefix).toString()}/64`;
}

/**
 * Whether `entry` is something `SVC_TRUST_PROXY` may list: an IPv4 or IPv6 address, a CIDR, or
 * one of {@link TRUST_PROXY_NAMES}.
 *
 * @example
 * isTrustProxyEntry('10.0.0.0/8'); // true
 * isTrustProxyEntry('true'); // false: trusting every peer would let any caller choose its address
 */
export function isTrustProxyEntry(entry: string): boolean {
  if ((TRUST_PROXY_NAMES as readonly string[]).includes(entry)) return true;
  if (ipaddr.isValid(entry)) return true;
  if (!entry.includes('/')) return false;
  try {
    ipaddr.parseCIDR(entry);
    return true;
  } catch {
    return false;
  }
}

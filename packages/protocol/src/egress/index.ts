import { lookup as dnsLookup } from 'node:dns/promises';
import { isIP, type LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';
import { Agent, buildConnector, type Dispatcher } from 'undici';

/**
 * The one owner of outbound-address policy, shared by the server (payload fetches, webhooks,
 * deliveries, repository hosts) and the node agent (buyer-supplied `payload_url`s): which addresses
 * are public unicast, and an undici dispatcher that resolves a name itself and judges every address
 * it resolved to at connect time, so that the address judged is the address connected to (DNS
 * rebinding cannot swap it). IPv6 forms that embed an IPv4 address (mapped, translated,
 * compatible, NAT64, 6to4, Teredo) are judged by the IPv4 address inside. docs/security.md lists
 * what is allowed and refused.
 */

/** What {@link classifyAddress} says of one address. */
export type AddressVerdict = { allowed: true; address: string } | { allowed: false; address: string; reason: string };

const { IPv4 } = ipaddr;
type V4 = ipaddr.IPv4;
type V6 = ipaddr.IPv6;

const V4_WORDS: Record<string, string> = {
  unspecified: 'unspecified (0.0.0.0/8)',
  broadcast: 'broadcast',
  multicast: 'multicast',
  linkLocal: 'link-local',
  loopback: 'loopback',
  carrierGradeNat: 'carrier-grade NAT (100.64.0.0/10)',
  private: 'private',
  reserved: 'reserved, documentation or benchmarking',
  as112: 'AS112 (reserved)',
  amt: 'AMT relay (reserved)',
};

const V6_WORDS: Record<string, string> = {
  unspecified: 'unspecified (::)',
  linkLocal: 'link-local',
  multicast: 'multicast',
  loopback: 'loopback',
  uniqueLocal: 'unique-local (fc00::/7)',
  deprecatedSiteLocal: 'site-local (fec0::/10)',
  discard: 'discard-only (100::/64)',
  benchmarking: 'benchmarking (2001:2::/48)',
  reserved: 'reserved or documentation',
  amt: 'AMT relay (reserved)',
  as112v6: 'AS112 (reserved)',
  deprecatedOrchid: 'ORCHID (reserved)',
  orchid2: 'ORCHIDv2 (reserved)',
  droneRemoteIdProtocolEntityTags: 'DRIP (reserved)',
  segmentRouting: 'segment routing (5f00::/16)',
};

const v4Of = (hi: number, lo: number): V4 => new IPv4([hi >> 8, hi & 0xff, lo >> 8, lo & 0xff]);
const inRange = (ip: V6, cidr: string): boolean => ip.match(ipaddr.parseCIDR(cidr) as [V6, number]);

/** The IPv4 addresses an IPv6 address carries, and the name of the form, when it is one of those forms. */
export function embeddedIPv4(ip: V6): { form: string; v4: V4[] } | undefined {
  const p = ip.parts;
  if (inRange(ip, '::ffff:0:0/96')) return { form: 'IPv4-mapped', v4: [v4Of(p[6] ?? 0, p[7] ?? 0)] };
  if (inRange(ip, '::ffff:0:0:0/96')) return { form: 'IPv4-translated', v4: [v4Of(p[6] ?? 0, p[7] ?? 0)] };
  if (inRange(ip, '::/96')) return { form: 'IPv4-compatible', v4: [v4Of(p[6] ?? 0, p[7] ?? 0)] };
  if (inRange(ip, '64:ff9b::/96')) return { form: 'NAT64', v4: [v4Of(p[6] ?? 0, p[7] ?? 0)] };
  // RFC 6052 with a /48 prefix: bits 48-63, then (after the zero "u" octet) bits 72-87.
  if (inRange(ip, '64:ff9b:1::/48'))
    return { form: 'NAT64 local-use', v4: [v4Of(p[3] ?? 0, (((p[4] ?? 0) & 0xff) << 8) | ((p[5] ?? 0) >> 8))] };
  if (inRange(ip, '2002::/16')) return { form: '6to4', v4: [v4Of(p[1] ?? 0, p[2] ?? 0)] };
  // Teredo: the server's IPv4 in bits 32-63, the client's in the last 32 bits, inverted.
  if (inRange(ip, '2001::/32'))
    return { form: 'Teredo', v4: [v4Of(p[2] ?? 0, p[3] ?? 0), v4Of((p[6] ?? 0) ^ 0xffff, (p[7] ?? 0) ^ 0xffff)] };
  return undefined;
}

function judgeV4(ip: V4): string | undefined {
  const range = ip.range();
  return range === 'unicast' ? undefined : (V4_WORDS[range] ?? range);
}

function judgeV6(ip: V6): string | undefined {
  const range = ip.range();
  // The addresses with a meaning of their own come first (`::` and `::1` are also in ::/96).
  if (range === 'unspecified' || range === 'loopback') return V6_WORDS[range];
  const embedded = embeddedIPv4(ip);
  if (embedded) {
    for (const v4 of embedded.v4) {
      const why = judgeV4(v4);
      if (why) return `${why} (${v4.toString()} inside an ${embedded.form} IPv6 address)`;
    }
    return undefined;
  }
  if (range !== 'unicast') return V6_WORDS[range] ?? range;
  if (!inRange(ip, '2000::/3')) return 'reserved (outside global unicast 2000::/3)';
  return undefined;
}

/**
 * Writes an IPv6 address's dotted IPv4 tail as two hex groups: ipaddr.js reads `::127.0.0.1` as
 * `::ffff:127.0.0.1`, which would name the wrong form.
 */
function hexTail(address: string): string {
  return address.replace(
    /:(\d+)\.(\d+)\.(\d+)\.(\d+)(%.*)?$/,
    (_m, a: string, b: string, c: string, d: string, zone: string | undefined) => {
      const hex = (hi: string, lo: string) => ((Number(hi) << 8) | Number(lo)).toString(16);
      return `:${hex(a, b)}:${hex(c, d)}${zone ?? ''}`;
    },
  );
}

/**
 * Judges one IP address (IPv4 or IPv6, brackets and zone allowed): allowed only when it is a public
 * unicast address, judging IPv6 forms that embed IPv4 by the IPv4 inside.
 *
 * @example
 * classifyAddress('::ffff:127.0.0.1'); // { allowed: false, reason: 'loopback (127.0.0.1 inside an IPv4-mapped IPv6 address)', ... }
 * classifyAddress('8.8.8.8'); // { allowed: true, address: '8.8.8.8' }
 */
export function classifyAddress(raw: string): AddressVerdict {
  const address = raw.replace(/^\[|\]$/g, '');
  // Only the two canonical families: no "0x7f.1" or "2130706433" shorthands reach here from DNS or a URL.
  if (!isIP(address.split('%')[0] ?? '')) return { allowed: false, address, reason: 'not an IP address' };
  let parsed: V4 | V6;
  try {
    parsed = ipaddr.parse(hexTail(address));
  } catch {
    return { allowed: false, address, reason: 'not an IP address' };
  }
  const why = parsed.kind() === 'ipv4' ? judgeV4(parsed as V4) : judgeV6(parsed as V6);
  return why ? { allowed: false, address, reason: why } : { allowed: true, address };
}

/** True when an address is not a public unicast address (see {@link classifyAddress}). */
export function isPrivateAddress(ip: string): boolean {
  return !classifyAddress(ip).allowed;
}

/** Resolves a name to all its addresses (dns.lookup by default; tests give their own). */
export type Resolve = (hostname: string) => Promise<{ address: string; family: number }[]>;

/** The system resolver: every address, in the order the system gives them. */
export const systemResolve: Resolve = (hostname) => dnsLookup(hostname, { all: true, verbatim: true });

/** Decides whether a host may be connected to, given every address it resolved to: an error refuses it. */
export type Refuse = (host: string, addresses: string[]) => Error | undefined;

/**
 * An undici dispatcher that asks `refuse` about every connection: for a name, with all the
 * addresses it resolved to (the socket then uses those same addresses); for an IP literal, with it.
 *
 * @example
 * const dispatcher = guardedDispatcher({ refuse: (host, all) => (all.every((a) => classifyAddress(a).allowed) ? undefined : new Error(host)) });
 */
export function guardedDispatcher(options: {
  refuse: Refuse;
  resolve?: Resolve;
  connectTimeoutMs?: number;
}): Dispatcher {
  const resolve = options.resolve ?? systemResolve;
  // Called by net.connect for a name: the addresses judged are the ones the socket then uses.
  const lookup: LookupFunction = (hostname, lookupOptions, callback) => {
    resolve(hostname).then(
      (all) => {
        const family = lookupOptions.family === 4 || lookupOptions.family === 6 ? lookupOptions.family : 0;
        const addresses = all.filter((a) => family === 0 || a.family === family);
        if (addresses.length === 0)
          return callback(Object.assign(new Error(`${hostname} does not resolve`), { code: 'ENOTFOUND' }), '', 0);
        const refused = options.refuse(
          hostname,
          all.map((a) => a.address),
        );
        if (refused) return callback(refused, '', 0);
        if (lookupOptions.all)
          return (callback as unknown as (err: null, a: { address: string; family: number }[]) => void)(
            null,
            addresses,
          );
        const first = addresses[0] ?? { address: '', family: 0 };
        callback(null, first.address, first.family);
      },
      (err: NodeJS.ErrnoException) => callback(err, '', 0),
    );
  };
  const connect = buildConnector({ lookup, timeout: options.connectTimeoutMs ?? 10_000 });
  return new Agent({
    connect: (connectOptions, callback) => {
      // net.connect skips the lookup for an IP literal: judge it here.
      const host = connectOptions.hostname.replace(/^\[|\]$/g, '');
      if (isIP(host)) {
        const refused = options.refuse(host, [host]);
        if (refused) return callback(refused, null);
      }
      connect(connectOptions, callback);
    },
  });
}

/** The first address of `addresses` that is not public unicast, with why; undefined when all are. */
export function firstRefused(addresses: string[]): Extract<AddressVerdict, { allowed: false }> | undefined {
  for (const address of addresses) {
    const verdict = classifyAddress(address);
    if (!verdict.allowed) return verdict;
  }
  return undefined;
}

import { describe, expect, it } from 'vitest';
import { classifyAddress, firstRefused } from './index.js';

/** [address, refused reason (a fragment), or null when allowed]. */
const TABLE: [string, string | null][] = [
  // IPv4
  ['8.8.8.8', null],
  ['1.1.1.1', null],
  ['93.184.216.34', null],
  ['127.0.0.1', 'loopback'],
  ['127.255.255.254', 'loopback'],
  ['10.1.2.3', 'private'],
  ['172.16.0.1', 'private'],
  ['172.31.255.255', 'private'],
  ['192.168.1.1', 'private'],
  ['169.254.169.254', 'link-local'],
  ['100.64.0.1', 'carrier-grade NAT'],
  ['0.0.0.0', 'unspecified'],
  ['0.1.2.3', 'unspecified'],
  ['255.255.255.255', 'broadcast'],
  ['224.0.0.1', 'multicast'],
  ['239.255.255.250', 'multicast'],
  ['240.0.0.1', 'reserved'],
  ['192.0.0.8', 'reserved'],
  ['192.0.2.1', 'documentation'],
  ['198.51.100.7', 'documentation'],
  ['203.0.113.9', 'documentation'],
  ['198.18.0.1', 'benchmarking'],
  ['198.19.255.1', 'benchmarking'],
  // IPv6 native
  ['2606:4700::1111', null],
  ['2001:4860:4860::8888', null],
  ['::', 'unspecified'],
  ['::1', 'loopback'],
  ['fe80::1', 'link-local'],
  ['fe80::1%eth0', 'link-local'],
  ['fc00::1', 'unique-local'],
  ['fd12:3456::1', 'unique-local'],
  ['fec0::1', 'site-local'],
  ['feff::1', 'site-local'],
  ['ff02::1', 'multicast'],
  ['2001:db8::1', 'documentation'],
  ['3fff::1', 'documentation'],
  ['2001:2::1', 'benchmarking'],
  ['100::1', 'discard'],
  ['4000::1', 'outside global unicast'],
  // IPv6 embedding IPv4: judged by the IPv4 inside
  ['::ffff:127.0.0.1', 'loopback (127.0.0.1 inside an IPv4-mapped'],
  ['::ffff:7f00:1', 'loopback (127.0.0.1 inside an IPv4-mapped'],
  ['::ffff:a9fe:a9fe', 'link-local (169.254.169.254 inside an IPv4-mapped'],
  ['::ffff:8.8.8.8', null],
  ['::ffff:0:127.0.0.1', 'loopback (127.0.0.1 inside an IPv4-translated'],
  ['::127.0.0.1', 'loopback (127.0.0.1 inside an IPv4-compatible'],
  ['::10.0.0.1', 'private (10.0.0.1 inside an IPv4-compatible'],
  ['::8.8.8.8', null],
  ['64:ff9b::7f00:1', 'loopback (127.0.0.1 inside an NAT64'],
  ['64:ff9b::192.168.0.1', 'private (192.168.0.1 inside an NAT64'],
  ['64:ff9b::808:808', null],
  ['64:ff9b:1:7f00:0:100::', 'loopback (127.0.0.1 inside an NAT64 local-use'],
  ['64:ff9b:1:a00:0:100::', 'private (10.0.0.1 inside an NAT64 local-use'],
  // RFC 6052 /48: octets 1-2 in bits 48-63, octets 3-4 in bits 72-87 (after the zero "u" octet).
  ['64:ff9b:1:808:8:800::', null],
  ['2002:7f00:1::', 'loopback (127.0.0.1 inside an 6to4'],
  ['2002:a9fe:a9fe::1', 'link-local (169.254.169.254 inside an 6to4'],
  ['2002:808:808::1', null],
  // Teredo: server 65.54.227.120, client 127.0.0.1 (stored inverted: 0x80ff:0xfffe).
  ['2001:0:4136:e378:8000:63bf:80ff:fffe', 'loopback (127.0.0.1 inside an Teredo'],
  // Teredo whose server part is private.
  ['2001:0:a00:1:8000:63bf:f7f7:f7f7', 'private (10.0.0.1 inside an Teredo'],
  // Teredo, server 65.54.227.120, client 8.8.8.8 (inverted f7f7:f7f7).
  ['2001:0:4136:e378:8000:63bf:f7f7:f7f7', null],
  // Not addresses at all.
  ['example.com', 'not an IP address'],
  ['0x7f.1', 'not an IP address'],
  ['2130706433', 'not an IP address'],
];

describe('classifyAddress', () => {
  it.each(TABLE)('%s -> %s', (address, refused) => {
    const verdict = classifyAddress(address);
    if (refused === null) {
      expect(verdict).toEqual({ allowed: true, address });
    } else {
      expect(verdict.allowed).toBe(false);
      expect(verdict.allowed ? '' : verdict.reason).toContain(refused);
    }
  });

  it('takes bracketed URL hosts', () => {
    expect(classifyAddress('[::ffff:7f00:1]')).toMatchObject({ allowed: false, address: '::ffff:7f00:1' });
  });
});

describe('firstRefused', () => {
  it('names the first address that is not public unicast, or nothing when all are', () => {
    expect(firstRefused(['8.8.8.8', '2606:4700::1111'])).toBeUndefined();
    expect(firstRefused(['8.8.8.8', '::127.0.0.1', '10.0.0.1'])).toMatchObject({
      allowed: false,
      address: '::127.0.0.1',
      reason: expect.stringContaining('IPv4-compatible'),
    });
  });
});

import { describe, expect, it } from 'vitest';
import { addressBucket, isTrustProxyEntry } from './client-address.js';

describe('addressBucket', () => {
  it('keeps IPv4, unwraps IPv4-mapped IPv6 and cuts other IPv6 to its /64', () => {
    expect(addressBucket('192.0.2.7')).toBe('192.0.2.7');
    expect(addressBucket('::ffff:192.0.2.7')).toBe('192.0.2.7');
    expect(addressBucket('2001:db8:1:2:aaaa:bbbb:cccc:dddd')).toBe('2001:db8:1:2::/64');
    expect(addressBucket('2001:DB8:1:2::1')).toBe('2001:db8:1:2::/64');
    expect(addressBucket('2001:db8:1:3::1')).toBe('2001:db8:1:3::/64');
    expect(addressBucket('::1')).toBe('::/64');
    expect(addressBucket('fe80::1%eth0')).toBe('fe80::/64');
    expect(addressBucket('not an address')).toBe('not an address');
  });
});

describe('isTrustProxyEntry', () => {
  it('takes addresses, CIDRs and the named ranges, nothing else', () => {
    for (const ok of ['10.0.0.1', '10.0.0.0/8', '2001:db8::/32', '::1', 'loopback', 'linklocal', 'uniquelocal'])
      expect(isTrustProxyEntry(ok)).toBe(true);
    for (const bad of ['true', '*', '10.0.0.0/33', 'proxy.example.com', '']) expect(isTrustProxyEntry(bad)).toBe(false);
  });
});

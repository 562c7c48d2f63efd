import { describe, expect, it, vi } from 'vitest';
import { newId, randomToken } from './ids.js';

describe('newId', () => {
  it('is the prefix, 10 time characters and 16 random ones, in Crockford base32', () => {
    expect(newId('req')).toMatch(/^req_[0-9a-hjkmnp-tv-z]{26}$/);
  });

  it('never repeats its random part, across many refills of the random pool', () => {
    const randomParts = Array.from({ length: 5_000 }, () => newId('x').slice(12));
    expect(new Set(randomParts).size).toBe(randomParts.length);
  });

  it('sorts by creation time', () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    try {
      vi.setSystemTime(1_800_000_000_000);
      const first = newId('job');
      vi.setSystemTime(1_800_000_000_001);
      expect(newId('job') > first).toBe(true);
      // Within one millisecond the order is the random part's, so only time orders ids.
      vi.setSystemTime(1_799_999_999_999);
      expect(newId('job') < first).toBe(true);
    } finally {
      vi.useRealTimers();
    }
  });
});

describe('randomToken', () => {
  it('has the length asked, in base32', () => {
    expect(randomToken(24)).toMatch(/^[0-9a-hjkmnp-tv-z]{24}$/);
  });
});

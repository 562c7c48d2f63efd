import { describe, expect, it } from 'vitest';
import { newId, randomToken } from './ids.js';

describe('newId', () => {
  it('is the prefix, 10 time characters and 16 random ones, in Crockford base32', () => {
    expect(newId('req')).toMatch(/^req_[0-9a-hjkmnp-tv-z]{26}$/);
  });

  it('never repeats its random part, across many refills of the random pool', () => {
    const randomParts = Array.from({ length: 5_000 }, () => newId('x').slice(12));
    expect(new Set(randomParts).size).toBe(randomParts.length);
  });

  it('sorts by creation time', async () => {
    const first = newId('job');
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(newId('job') > first).toBe(true);
  });
});

describe('randomToken', () => {
  it('has the length asked, in base32', () => {
    expect(randomToken(24)).toMatch(/^[0-9a-hjkmnp-tv-z]{24}$/);
  });
});

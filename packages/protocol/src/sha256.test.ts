import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';

const reference = (data: Uint8Array | string) => createHash('sha256').update(data).digest();

async function helpers(withOneShot: boolean) {
  vi.resetModules();
  if (!withOneShot) {
    // Node 20.10 and 20.11 (allowed by the engines field) have no crypto.hash.
    vi.doMock('node:crypto', async (original) => ({ ...(await original<object>()), hash: undefined }));
  }
  const crypto = await import('node:crypto');
  expect(typeof crypto.hash).toBe(withOneShot ? 'function' : 'undefined');
  return import('./sha256.js');
}

afterEach(() => {
  vi.doUnmock('node:crypto');
  vi.resetModules();
});

describe.each([true, false])('sha256HexOf / sha256BytesOf (one-shot crypto.hash: %s)', (withOneShot) => {
  it('hash strings as UTF-8 and bytes as they are, like createHash', async () => {
    const { sha256BytesOf, sha256HexOf } = await helpers(withOneShot);
    fc.assert(
      fc.property(fc.oneof(fc.string({ unit: 'binary' }), fc.uint8Array({ maxLength: 200 })), (data) => {
        expect(sha256HexOf(data)).toBe(reference(data).toString('hex'));
        expect(sha256BytesOf(data).equals(reference(data))).toBe(true);
      }),
    );
    expect(sha256HexOf('hello world')).toBe('b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9');
  });
});

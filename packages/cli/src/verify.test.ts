import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { verify } from './verify.js';

const IDENTITY = `01${'00'.repeat(31)}`;

describe('svc verify: pinned keys must be strict Ed25519 keys', () => {
  const dir = mkdtempSync(join(tmpdir(), 'svc-verify-'));
  const bundle = join(dir, 'bundle.json');
  writeFileSync(bundle, '{}');

  it('refuses a small-order --public-key before reading the bundle', async () => {
    await expect(verify([bundle, '--public-key', IDENTITY])).rejects.toThrow(
      `--public-key ${IDENTITY} is a small-order point (order 1): signatures under it can be forged`,
    );
  });

  it('refuses a trust file naming a small-order or non-canonical key', async () => {
    const trust = join(dir, 'keys.json');
    writeFileSync(trust, JSON.stringify({ keys: [{ key_id: 'pk_bad', public_key_hex: `ed${'ff'.repeat(30)}7f` }] }));
    await expect(verify([bundle, '--trust-file', trust])).rejects.toThrow(
      `--trust-file ${trust}: key 0 is a non-canonical encoding (y is not reduced mod p)`,
    );
    writeFileSync(trust, JSON.stringify([IDENTITY]));
    await expect(verify([bundle, '--trust-file', trust])).rejects.toThrow(/key 0 is a small-order point \(order 1\)/);
  });

  it('refuses a --log-key that is not a note verifier key before reading the bundle', async () => {
    await expect(verify([bundle, '--log-key', 'svc.test/log+00000000+AQ=='])).rejects.toThrow(
      '--log-key svc.test/log+00000000+AQ==: not an Ed25519 note verifier key',
    );
  });
});

import { describe, expect, it } from 'vitest';
import { bundleHash, certificateMessage, signCertificate, verifyCertificate } from './certificate.js';
import { ProtocolError } from './errors.js';
import { canonicalJson } from './jcs.js';
import { sha256Hex } from './keys.js';
import { merkleRoot } from './merkle.js';
import { NODE_PUBLIC_KEY_HEX, PLATFORM_PUBLIC_KEY_HEX, flipByte, platformKey } from './test-keys.js';

const fields = { run_id: 'run_1', event_count: 0, root_hash_hex: merkleRoot([]) };

describe('certificateMessage', () => {
  it('is the UTF-8 of the four lines, each ending in a newline', () => {
    expect(certificateMessage(fields).toString('utf8')).toBe(`SVC2-draft\nrun_1\n0\n${merkleRoot([])}\n`);
  });

  it.each<[Record<string, unknown>, string]>([
    [{ run_id: '' }, '/run_id'],
    [{ run_id: 'run\n2' }, '/run_id'],
    [{ event_count: -1 }, '/event_count'],
    [{ event_count: 1.5 }, '/event_count'],
    [{ root_hash_hex: merkleRoot([]).toUpperCase() }, '/root_hash'],
  ])('rejects %j at %s', (change, path) => {
    expect(() => certificateMessage({ ...fields, ...change } as typeof fields)).toThrow(ProtocolError);
    try {
      certificateMessage({ ...fields, ...change } as typeof fields);
    } catch (err) {
      expect((err as ProtocolError).path).toBe(path);
    }
  });
});

describe('signCertificate / verifyCertificate', () => {
  const signature = signCertificate(fields, platformKey);

  it('verifies with the platform key only', () => {
    expect(verifyCertificate(fields, signature, PLATFORM_PUBLIC_KEY_HEX)).toBe(true);
    expect(verifyCertificate(fields, signature, NODE_PUBLIC_KEY_HEX)).toBe(false);
  });

  it('covers run_id, event_count and root_hash', () => {
    expect(verifyCertificate({ ...fields, run_id: 'run_2' }, signature, PLATFORM_PUBLIC_KEY_HEX)).toBe(false);
    expect(verifyCertificate({ ...fields, event_count: 1 }, signature, PLATFORM_PUBLIC_KEY_HEX)).toBe(false);
    const root = flipByte(fields.root_hash_hex, 0, 1);
    expect(verifyCertificate({ ...fields, root_hash_hex: root }, signature, PLATFORM_PUBLIC_KEY_HEX)).toBe(false);
  });

  it('never throws on malformed input', () => {
    expect(verifyCertificate({ ...fields, event_count: -1 }, signature, PLATFORM_PUBLIC_KEY_HEX)).toBe(false);
    expect(verifyCertificate(fields, signature.toUpperCase(), PLATFORM_PUBLIC_KEY_HEX)).toBe(false);
    expect(verifyCertificate(fields, signature, 'nope')).toBe(false);
    expect(verifyCertificate(undefined as unknown as typeof fields, signature, PLATFORM_PUBLIC_KEY_HEX)).toBe(false);
  });
});

describe('bundleHash', () => {
  const bundle = { type: 'svc.evidence_bundle.v1', job: { id: 'job_1' }, receipts: [] };

  it('is SHA-256 of JCS(bundle), ignoring bundle_hash', () => {
    const expected = sha256Hex(canonicalJson(bundle));
    expect(bundleHash(bundle)).toBe(expected);
    expect(bundleHash({ ...bundle, bundle_hash: expected })).toBe(expected);
  });

  it('changes with any content', () => {
    expect(bundleHash({ ...bundle, job: { id: 'job_2' } })).not.toBe(bundleHash(bundle));
  });
});

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ProtocolError } from './errors.js';
import { sha256Hex } from './keys.js';
import { decodeSvc1Message, signSvc1, svc1Message, verifySvc1, type Svc1Fields } from './svc1.js';
import { NODE_PUBLIC_KEY_HEX, PLATFORM_PUBLIC_KEY_HEX, flipByte, nodeKey, platformKey } from './test-keys.js';

const fields: Svc1Fields = {
  job_id: 'job_01JD0000000000000000000000',
  node_public_key_hex: NODE_PUBLIC_KEY_HEX,
  result_hash_hex: sha256Hex('hello world'),
  metering_units: 1234,
};

function pathOf(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (err) {
    if (err instanceof ProtocolError) return err.path;
    throw err;
  }
  return 'did not throw';
}

describe('svc1Message', () => {
  it('lays out the bytes as DESIGN section 9 says', () => {
    const units = Buffer.alloc(8);
    units.writeBigUInt64BE(1234n);
    const expected = Buffer.concat([
      Buffer.from([0x53, 0x56, 0x43, 0x31, 0x00]),
      Buffer.from([0x00, 30]),
      Buffer.from(fields.job_id, 'ascii'),
      Buffer.from(fields.node_public_key_hex, 'hex'),
      Buffer.from(fields.result_hash_hex, 'hex'),
      units,
    ]);
    expect(svc1Message(fields)).toEqual(expected);
    expect(svc1Message(fields).length).toBe(5 + 2 + 30 + 32 + 32 + 8);
  });

  it('encodes the extremes of metering_units and job_id', () => {
    const max = svc1Message({ ...fields, metering_units: Number.MAX_SAFE_INTEGER });
    expect(max.subarray(-8).toString('hex')).toBe('001fffffffffffff');
    expect(
      svc1Message({ ...fields, metering_units: 0 })
        .subarray(-8)
        .toString('hex'),
    ).toBe('0000000000000000');
    const long = svc1Message({ ...fields, job_id: 'a'.repeat(256) });
    expect(long.readUInt16BE(5)).toBe(256);
  });

  it.each<[Partial<Svc1Fields>, string]>([
    [{ job_id: '' }, '/job_id'],
    [{ job_id: 'a'.repeat(257) }, '/job_id'],
    [{ job_id: 'job id' }, '/job_id'],
    [{ job_id: 'jöb' }, '/job_id'],
    [{ job_id: 'job\n' }, '/job_id'],
    [{ node_public_key_hex: NODE_PUBLIC_KEY_HEX.toUpperCase() }, '/node_public_key'],
    [{ node_public_key_hex: NODE_PUBLIC_KEY_HEX.slice(2) }, '/node_public_key'],
    [{ result_hash_hex: `${sha256Hex('x')}00` }, '/result_hash'],
    [{ result_hash_hex: 'g'.repeat(64) }, '/result_hash'],
    [{ metering_units: -1 }, '/metering_units'],
    [{ metering_units: 1.5 }, '/metering_units'],
    [{ metering_units: 2 ** 53 }, '/metering_units'],
    [{ metering_units: Number.NaN }, '/metering_units'],
  ])('rejects %j at %s', (change, path) => {
    expect(pathOf(() => svc1Message({ ...fields, ...change }))).toBe(path);
  });
});

describe('decodeSvc1Message', () => {
  it('inverts svc1Message', () => {
    expect(decodeSvc1Message(svc1Message(fields))).toEqual(fields);
  });

  it('rejects truncated, extended, mislabelled and out-of-range messages', () => {
    const bytes = svc1Message(fields);
    expect(() => decodeSvc1Message(bytes.subarray(0, -1))).toThrow(ProtocolError);
    expect(() => decodeSvc1Message(Buffer.concat([bytes, Buffer.from([0])]))).toThrow(ProtocolError);
    expect(() => decodeSvc1Message(Buffer.concat([Buffer.from('SVC2'), bytes.subarray(4)]))).toThrow(ProtocolError);
    const big = Buffer.from(bytes);
    big.writeBigUInt64BE(2n ** 53n, big.length - 8);
    expect(() => decodeSvc1Message(big)).toThrow(ProtocolError);
  });

  it('round-trips any valid fields', () => {
    const jobId = fc.stringMatching(/^[A-Za-z0-9._:-]{1,256}$/);
    const hash = fc.uint8Array({ minLength: 32, maxLength: 32 }).map((b) => Buffer.from(b).toString('hex'));
    fc.assert(
      fc.property(jobId, hash, hash, fc.maxSafeNat(), (job_id, key, result, units) => {
        const f = { job_id, node_public_key_hex: key, result_hash_hex: result, metering_units: units };
        expect(decodeSvc1Message(svc1Message(f))).toEqual(f);
      }),
    );
  });
});

describe('signSvc1 / verifySvc1', () => {
  const signature = signSvc1(fields, nodeKey);

  it('signs deterministically and verifies', () => {
    expect(signature).toMatch(/^[0-9a-f]{128}$/);
    expect(signSvc1(fields, nodeKey)).toBe(signature);
    expect(verifySvc1(fields, signature)).toBe(true);
  });

  it('refuses to sign with a key that is not node_public_key', () => {
    expect(pathOf(() => signSvc1(fields, platformKey))).toBe('/node_public_key');
  });

  it('rejects a receipt re-attributed to another node', () => {
    expect(verifySvc1({ ...fields, node_public_key_hex: PLATFORM_PUBLIC_KEY_HEX }, signature)).toBe(false);
  });

  it('is strict about the signature encoding and never throws', () => {
    expect(verifySvc1(fields, signature.toUpperCase())).toBe(false);
    expect(verifySvc1(fields, `${signature}00`)).toBe(false);
    expect(verifySvc1(fields, signature.slice(0, 126))).toBe(false);
    expect(verifySvc1(fields, '')).toBe(false);
    expect(verifySvc1({ ...fields, job_id: 'bad id' }, signature)).toBe(false);
    expect(verifySvc1({ ...fields, metering_units: -1 }, signature)).toBe(false);
    expect(verifySvc1(null as unknown as Svc1Fields, signature)).toBe(false);
    expect(verifySvc1({} as Svc1Fields, signature)).toBe(false);
    expect(verifySvc1(fields, 42 as unknown as string)).toBe(false);
  });

  it('rejects any single-byte change of any field or of the signature', () => {
    const which = fc.constantFrom('job_id', 'node_public_key_hex', 'result_hash_hex', 'metering_units', 'signature');
    fc.assert(
      fc.property(which, fc.nat(), fc.integer({ min: 1, max: 255 }), (field, index, mask) => {
        let changed: Svc1Fields = fields;
        let sig = signature;
        if (field === 'signature') {
          sig = flipByte(signature, index, mask);
        } else if (field === 'metering_units') {
          // XOR one of the low four bytes of the u64 (a negative result is a change too).
          changed = { ...fields, metering_units: fields.metering_units ^ (mask << ((index % 4) * 8)) };
        } else if (field === 'job_id') {
          const i = index % fields.job_id.length;
          const c = String.fromCharCode(fields.job_id.charCodeAt(i) ^ mask);
          changed = { ...fields, job_id: fields.job_id.slice(0, i) + c + fields.job_id.slice(i + 1) };
        } else {
          changed = { ...fields, [field]: flipByte(fields[field], index, mask) };
        }
        expect(verifySvc1(changed, sig)).toBe(false);
      }),
      { numRuns: 300 },
    );
  });
});

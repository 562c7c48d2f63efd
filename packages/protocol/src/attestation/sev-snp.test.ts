import { readFileSync } from 'node:fs';
import * as x509 from '@peculiar/x509';
import { beforeAll, describe, expect, it } from 'vitest';
import { derSpans, expectEachFails, flips, FLIPS_TIMEOUT_MS, type Span } from './byte-flips.js';
import { verifySevSnp, type SevSnpVerification } from './sev-snp.js';
import { createSnpTestChain, type SnpTestChain } from './testing.js';

const V = new URL('../../vectors/attestation/sev-snp/', import.meta.url);
const report = readFileSync(new URL('attestation.bin', V));
const vcek = readFileSync(new URL('vcek.testcer', V));
const milan = readFileSync(new URL('ask_ark_milan.pem', V), 'utf8');
const genoa = readFileSync(new URL('ask_ark_genoa.pem', V), 'utf8');
const NOW = new Date('2026-11-24T00:00:00Z');

const failed = (v: SevSnpVerification) => v.checks.filter((c) => !c.ok).map((c) => c.name);
const flip = (b: Uint8Array, i: number) => {
  const c = Buffer.from(b);
  c[i] = (c[i] as number) ^ 0x01;
  return c;
};

/** The signature ends here: before it the signed fields, after it reserved bytes that must be zero. */
const SIGNED_END = 0x2a0 + 144;

/** The ATTESTATION_REPORT's fields (SEV-SNP ABI specification), end to end, as spans. */
function reportFields(): Span[] {
  const layout: Array<[string, number, boolean?]> = [
    ['version', 4],
    ['guest_svn', 4],
    ['policy', 8],
    ['family_id', 16],
    ['image_id', 16],
    ['vmpl', 4],
    ['signature_algo', 4],
    ['current_tcb', 8],
    ['platform_info', 8],
    ['key info', 4],
    ['reserved 0x4c', 4],
    ['report_data', 64],
    ['measurement', 48],
    ['host_data', 32],
    ['id_key_digest', 48],
    ['author_key_digest', 48],
    ['report_id', 32],
    ['report_id_ma', 32],
    ['reported_tcb', 8],
    ['cpuid family', 1],
    ['cpuid model', 1],
    ['cpuid stepping', 1],
    ['reserved 0x18b', 21],
    ['chip_id', 64],
    ['committed_tcb', 8],
    ['current build, minor, major', 3],
    ['reserved 0x1eb', 1],
    ['committed build, minor, major', 3],
    ['reserved 0x1ef', 1],
    ['launch_tcb', 8],
    ['launch_mit_vector', 8],
    ['current_mit_vector', 8],
    ['reserved 0x208', 0x2a0 - 0x208],
    // r and s, 72 bytes each, little-endian: the verifier decodes them itself, so every byte.
    ['signature r', 72, true],
    ['signature s', 72, true],
    ['reserved after the signature', 0x4a0 - SIGNED_END],
  ];
  let at = 0;
  return layout.map(([name, size, every]) => {
    const span = { name, start: at, end: at + size, every: every === true };
    at += size;
    return span;
  });
}

describe('SEV-SNP verifier on the go-sev-guest vector (Milan)', () => {
  it('passes chain, signature, TCB and chip id, and refuses the debug-enabled guest', async () => {
    const v = await verifySevSnp({ report, vcek, chain: milan, now: NOW });
    expect(v.checks.map((c) => [c.name, c.ok])).toEqual([
      ['report-structure', true],
      ['vcek-parse', true],
      ['chain-parse', true],
      ['ark-pinned', true],
      ['ark-self-signed', true],
      ['ask-signed-by-ark', true],
      ['vcek-signed-by-ask', true],
      ['chain-validity', true],
      ['report-signature', true],
      ['vcek-tcb', true],
      ['vcek-chip-id', true],
      ['policy-no-debug', false],
    ]);
    expect(v.ok).toBe(false);
    expect(v.product).toBe('Milan');
    expect(v.report).toMatchObject({
      version: 2,
      policy: 'b0000',
      debug: true,
      vmpl: 0,
      measurement: 'b07af9620f3b839b47996422ddec6058338951d984e312115131ea82705eaf5b6bdf8a9ece31a5a608eb0cf2e4872b01',
      report_data: `0102030405${'00'.repeat(59)}`,
      chip_id:
        '3ac3fe21e13fb0990eb28a802e3fb6a29483a6b0753590c951bdd3b8e53786184ca39e359669a2b76a1936776b564ea464cdce40c05f63c9b610c5068b006b5d',
      reported_tcb: { bootloader: 2, tee: 0, snp: 5, microcode: 68, raw: '0200000000000544' },
    });
  });

  it('uses the embedded Milan chain when none is given, and the Genoa chain fails at the VCEK', async () => {
    expect(failed(await verifySevSnp({ report, vcek, now: NOW }))).toEqual(['policy-no-debug']);
    expect(failed(await verifySevSnp({ report, vcek, chain: genoa, now: NOW }))).toEqual([
      'vcek-signed-by-ask',
      'policy-no-debug',
    ]);
  });

  it('judges certificate validity against the injected clock', async () => {
    const v = await verifySevSnp({ report, vcek, chain: milan, now: new Date('2030-01-01T00:00:00Z') });
    expect(failed(v)).toEqual(['chain-validity', 'policy-no-debug']);
    expect(v.checks.find((c) => c.name === 'chain-validity')?.detail).toContain('SEV-VCEK');
  });

  // byte-flips.ts: each field's first and last byte (every byte of the signature, which the
  // verifier decodes itself) and a seeded sample; SVC_TEST_FLIPS=all flips every byte.
  it(
    'fails, naming the check, on an edited byte of any field of the report',
    async () => {
      const fields = reportFields();
      expect(fields.at(-1)?.end).toBe(report.length);
      await expectEachFails(
        'report',
        flips('report', report.length, fields, 32),
        async (i) => failed(await verifySevSnp({ report: flip(report, i), vcek, chain: milan, now: NOW })),
        (i) => [i < SIGNED_END ? 'report-signature' : 'report-structure'],
      );
    },
    FLIPS_TIMEOUT_MS,
  );

  it(
    'fails, naming the check, on an edited byte of any field of the VCEK',
    async () => {
      await expectEachFails(
        'VCEK',
        flips('VCEK', vcek.length, derSpans(vcek, 'VCEK'), 16),
        async (i) => failed(await verifySevSnp({ report, vcek: flip(vcek, i), chain: milan, now: NOW })),
        () => ['vcek-parse', 'vcek-signed-by-ask'],
      );
    },
    FLIPS_TIMEOUT_MS,
  );

  it(
    'fails, naming the check, on an edited byte of any field of the ASK and of the ARK',
    async () => {
      const [ask, ark] = x509.PemConverter.decode(milan).map((d) => Buffer.from(d));
      if (!ask || !ark) throw new Error('vector chain');
      const pem = (a: Uint8Array, b: Uint8Array) =>
        x509.PemConverter.encode(
          [a, b].map((d) => new Uint8Array(d).buffer),
          'CERTIFICATE',
        );
      await expectEachFails(
        'ASK',
        flips('ASK', ask.length, derSpans(ask, 'ASK'), 16),
        async (i) => failed(await verifySevSnp({ report, vcek, chain: pem(flip(ask, i), ark), now: NOW })),
        () => ['chain-parse', 'ask-signed-by-ark', 'vcek-signed-by-ask'],
      );
      await expectEachFails(
        'ARK',
        flips('ARK', ark.length, derSpans(ark, 'ARK'), 16),
        async (i) => failed(await verifySevSnp({ report, vcek, chain: pem(ask, flip(ark, i)), now: NOW })),
        () => ['chain-parse', 'ark-pinned'],
      );
    },
    FLIPS_TIMEOUT_MS,
  );
});

describe('SEV-SNP verifier on a synthetic report under a test root', () => {
  let chain: SnpTestChain;
  beforeAll(async () => {
    chain = await createSnpTestChain();
  });

  it('passes every check when the test root is injected, and fails ark-pinned when it is not', async () => {
    const signed = chain.signReport({ reportData: Buffer.alloc(64, 7) });
    const v = await verifySevSnp({
      report: signed,
      vcek: chain.vcekDer,
      chain: chain.chainPem,
      now: NOW,
      extraRoots: [chain.pin],
    });
    expect(failed(v)).toEqual([]);
    expect(v.ok).toBe(true);
    expect(v.report?.report_data).toBe('07'.repeat(64));
    expect(
      failed(await verifySevSnp({ report: signed, vcek: chain.vcekDer, chain: chain.chainPem, now: NOW })),
    ).toEqual(['ark-pinned']);
  });

  it("fails vcek-tcb when the reported TCB is not the VCEK's, and policy-no-debug on a debug policy", async () => {
    const older = chain.signReport({
      reportData: Buffer.alloc(64),
      tcb: { bootloader: 3, tee: 0, snp: 7, microcode: 115 },
    });
    const v = await verifySevSnp({
      report: older,
      vcek: chain.vcekDer,
      chain: chain.chainPem,
      now: NOW,
      extraRoots: [chain.pin],
    });
    expect(failed(v)).toEqual(['vcek-tcb']);
    expect(v.checks.find((c) => c.name === 'vcek-tcb')?.detail).toBe('snp VCEK 8 != report 7');
    const debug = chain.signReport({ reportData: Buffer.alloc(64), policy: 0xb0000n });
    expect(
      failed(
        await verifySevSnp({
          report: debug,
          vcek: chain.vcekDer,
          chain: chain.chainPem,
          now: NOW,
          extraRoots: [chain.pin],
        }),
      ),
    ).toEqual(['policy-no-debug']);
  });
});

import { readFileSync } from 'node:fs';
import * as x509 from '@peculiar/x509';
import { beforeAll, describe, expect, it } from 'vitest';
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

  it('fails, naming the check, on any edited byte of the report', async () => {
    for (let i = 0; i < report.length; i++) {
      const names = failed(await verifySevSnp({ report: flip(report, i), vcek, chain: milan, now: NOW }));
      const expected = i < 0x2a0 + 144 ? 'report-signature' : 'report-structure';
      if (!names.includes(expected))
        throw new Error(`byte 0x${i.toString(16)}: failed ${names.join(',') || 'nothing'}, expected ${expected}`);
    }
  }, 120_000);

  it('fails, naming the check, on any edited byte of the VCEK', async () => {
    for (let i = 0; i < vcek.length; i++) {
      const names = failed(await verifySevSnp({ report, vcek: flip(vcek, i), chain: milan, now: NOW }));
      if (!names.some((n) => ['vcek-parse', 'vcek-signed-by-ask'].includes(n)))
        throw new Error(`VCEK byte ${i}: failed only ${names.join(',')}`);
    }
  }, 120_000);

  it('fails, naming the check, on any edited byte of the ASK and of the ARK', async () => {
    const [ask, ark] = x509.PemConverter.decode(milan).map((d) => Buffer.from(d));
    if (!ask || !ark) throw new Error('vector chain');
    const pem = (a: Uint8Array, b: Uint8Array) =>
      x509.PemConverter.encode(
        [a, b].map((d) => new Uint8Array(d).buffer),
        'CERTIFICATE',
      );
    for (let i = 0; i < ask.length; i++) {
      const names = failed(await verifySevSnp({ report, vcek, chain: pem(flip(ask, i), ark), now: NOW }));
      if (!names.some((n) => ['chain-parse', 'ask-signed-by-ark', 'vcek-signed-by-ask'].includes(n)))
        throw new Error(`ASK byte ${i}: failed only ${names.join(',')}`);
    }
    for (let i = 0; i < ark.length; i++) {
      const names = failed(await verifySevSnp({ report, vcek, chain: pem(ask, flip(ark, i)), now: NOW }));
      if (!names.some((n) => ['chain-parse', 'ark-pinned'].includes(n)))
        throw new Error(`ARK byte ${i}: failed only ${names.join(',')}`);
    }
  }, 240_000);
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

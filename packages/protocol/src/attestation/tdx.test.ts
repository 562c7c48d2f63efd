import { readFileSync } from 'node:fs';
import * as x509 from '@peculiar/x509';
import { describe, expect, it } from 'vitest';
import { parseTdxQuote } from './tdx-quote.js';
import { verifyTdx, type TdxCollateral, type TdxVerification } from './tdx.js';

const V = new URL('../../vectors/attestation/tdx/', import.meta.url);
const read = (name: string) => readFileSync(new URL(name, V));
const v4 = read('tdx_prod_quote_SPR_E4.dat');
const v5 = read('quote_v5_sample.dat');
// Intel's public TCB signing certificate (PCS serves it in the TCB-Info-Issuer-Chain header); the
// vectors lack it, and the verifier accepts it only because it chains to the pinned root.
const signingPem = readFileSync(new URL('testdata/tcb_signing.pem', import.meta.url), 'utf8');
const collateral: TdxCollateral = {
  tcbInfo: read('sample_tcbInfo_response').toString('utf8'),
  qeIdentity: read('sample_qeIdentity_response').toString('utf8'),
  tcbSigningChain: signingPem,
  pckCrl: read('pckcrl'),
  rootCrl: read('rootcrl.der'),
};
const AT = new Date('2023-06-20T00:00:00Z');

const failed = (v: TdxVerification) => v.checks.filter((c) => !c.ok).map((c) => c.name);
const flip = (b: Uint8Array, i: number) => {
  const c = Buffer.from(b);
  c[i] = (c[i] as number) ^ 0x01;
  return c;
};

describe('TDX verifier on the go-tdx-guest production quote (v4)', () => {
  it('passes structure, chain, CRLs, QE, quote signature and collateral; names the TCB level the quote misses', async () => {
    const v = await verifyTdx({ quote: v4, collateral, now: AT });
    expect(v.checks.map((c) => [c.name, c.ok])).toEqual([
      ['quote-structure', true],
      ['pck-chain-parse', true],
      ['root-pinned', true],
      ['pck-chain-signatures', true],
      ['pck-chain-validity', true],
      ['crl-signatures', true],
      ['crl-not-revoked', true],
      ['qe-report-signature', true],
      ['qe-report-binds-key', true],
      ['quote-signature', true],
      ['td-no-debug', true],
      ['tcb-signing-chain', true],
      ['tcb-info-signature', true],
      ['tcb-info-current', true],
      ['qe-identity-signature', true],
      ['qe-identity-current', true],
      ['tcb-info-fmspc', true],
      ['tcb-status', false],
    ]);
    expect(v.checks.at(-1)?.detail).toContain('TDX component 2 4 < 5');
    expect(v.tcb_status).toBeNull();
    expect(v.fmspc).toBe('50806f000000');
    expect(v.quote).toMatchObject({ version: 4, body_type: 2, trailing: 39 });
    expect(v.quote?.body.mr_td).toBe(
      '6363b8043668a3ad953278e10389574d326c6749fb78aa810ecd9336923db86f22fc00b8dcd404bc10d5e119d7215cbb',
    );
    expect(v.quote?.body.report_data).toBe(
      '6c62dec1b8191749a31dab490be532a35944dea47caef1f980863993d9899545eb7406a38d1eed313b987a467dacead6f0c87a6d766c66f6f29f8acb281f1113',
    );
    expect(v.quote?.body.rtmrs).toHaveLength(4);
  });

  it('judges collateral, CRL and certificate dates against the injected clock', async () => {
    expect(failed(await verifyTdx({ quote: v4, collateral, now: new Date('2023-08-01T00:00:00Z') }))).toEqual([
      'crl-signatures',
      'tcb-info-current',
      'qe-identity-current',
      'tcb-status',
    ]);
    // After May 2025 the TCB signing certificate itself has expired: nothing it signed is trusted.
    expect(failed(await verifyTdx({ quote: v4, collateral, now: new Date('2026-01-01T00:00:00Z') }))).toEqual(
      expect.arrayContaining(['tcb-signing-chain', 'tcb-info-signature', 'qe-identity-signature', 'tcb-status']),
    );
  });

  it("refuses collateral signed by anything but the pinned root's TCB signing key", async () => {
    const v = await verifyTdx({
      quote: v4,
      collateral: {
        ...collateral,
        tcbSigningChain: v4.toString('latin1').slice(v4.toString('latin1').indexOf('-----BEGIN')),
      },
      now: AT,
    });
    expect(failed(v)).toEqual(['tcb-signing-chain', 'tcb-info-signature', 'qe-identity-signature', 'tcb-status']);
  });
});

describe('TDX verifier on the v5 sample', () => {
  it('parses the TDX 1.5 body and verifies its signatures, and reports that the collateral is for another FMSPC', async () => {
    const v = await verifyTdx({ quote: v5, collateral, now: AT });
    expect(v.quote).toMatchObject({ version: 5, body_type: 3, trailing: 0 });
    expect(v.quote?.body.mr_service_td).toHaveLength(96);
    expect(failed(v)).toEqual(['pck-chain-validity', 'tcb-info-fmspc', 'tcb-status']);
    expect(v.checks.find((c) => c.name === 'tcb-info-fmspc')?.detail).toContain(
      "FMSPC 90c06f000000 / PCE id 0000 is not the TCB Info's 50806f000000",
    );
  });
});

/** The check an edit of quote byte `i` must fail, by the region the byte lies in. */
function expectedFor(bytes: Buffer, i: number): string[] {
  const q = parseTdxQuote(bytes);
  const signedEnd = q.signed.length;
  const sig = signedEnd + 4;
  const cert = sig + 128 + 6;
  const auth = cert + 384 + 64 + 2;
  const inner = auth + q.qe_auth_data.length;
  if (i < signedEnd) return ['quote-structure', 'quote-signature'];
  if (i < sig) return ['quote-structure'];
  if (i < sig + 64) return ['quote-signature'];
  if (i < sig + 128) return ['quote-signature', 'qe-report-binds-key'];
  if (i < cert) return ['quote-structure'];
  if (i < cert + 384) return ['qe-report-signature'];
  if (i < cert + 448) return ['qe-report-signature'];
  if (i < auth) return ['quote-structure'];
  if (i < inner) return ['qe-report-binds-key'];
  if (i < inner + 6) return ['quote-structure'];
  return ['quote-structure', 'pck-chain-parse', 'pck-chain-signatures', 'root-pinned'];
}

describe('TDX verifier: any edited byte fails and names the check', () => {
  for (const [name, quote] of [
    ['v4', v4],
    ['v5', v5],
  ] as const) {
    it(`of the ${name} quote`, async () => {
      const end = quote.length - parseTdxQuote(quote).trailing;
      for (let i = 0; i < end; i++) {
        const names = failed(await verifyTdx({ quote: flip(quote, i), collateral, now: AT }));
        const want = expectedFor(quote, i);
        if (!names.some((n) => want.includes(n)))
          throw new Error(`${name} byte ${i}: failed ${names.join(',')}, expected one of ${want.join(',')}`);
      }
    }, 600_000);
  }

  const cases: Array<[string, (i: number) => Partial<TdxCollateral>, number, string[]]> = [
    [
      'TCB Info',
      (i) => ({ tcbInfo: flip(Buffer.from(collateral.tcbInfo), i).toString('latin1') }),
      collateral.tcbInfo.length,
      ['tcb-info-signature'],
    ],
    [
      'QE Identity',
      (i) => ({ qeIdentity: flip(Buffer.from(collateral.qeIdentity), i).toString('latin1') }),
      collateral.qeIdentity.length,
      ['qe-identity-signature'],
    ],
    ['PCK CRL', (i) => ({ pckCrl: flip(collateral.pckCrl, i) }), collateral.pckCrl.length, ['crl-signatures']],
    ['root CRL', (i) => ({ rootCrl: flip(collateral.rootCrl, i) }), collateral.rootCrl.length, ['crl-signatures']],
  ];
  const signingDer = Buffer.from(x509.PemConverter.decode(signingPem)[0] as ArrayBuffer);
  cases.push([
    'TCB signing certificate',
    (i) => ({ tcbSigningChain: x509.PemConverter.encode(new Uint8Array(flip(signingDer, i)).buffer, 'CERTIFICATE') }),
    signingDer.length,
    ['tcb-signing-chain'],
  ]);
  for (const [what, edit, length, want] of cases) {
    it(`of the ${what}`, async () => {
      for (let i = 0; i < length; i++) {
        const names = failed(await verifyTdx({ quote: v4, collateral: { ...collateral, ...edit(i) }, now: AT }));
        if (!names.some((n) => want.includes(n)))
          throw new Error(`${what} byte ${i}: failed ${names.join(',')}, expected ${want.join(',')}`);
      }
    }, 600_000);
  }
});

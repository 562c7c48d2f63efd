import { readFileSync } from 'node:fs';
import * as x509 from '@peculiar/x509';
import { describe, expect, it } from 'vitest';
import { commonName } from './checks.js';
import { derSpans, expectEachFails, flips, FLIPS_TIMEOUT_MS, type Span } from './byte-flips.js';
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

/** A field of a flipped structure and the checks an edit of it must fail (at least one of them). */
interface Field extends Span {
  want: string[];
}

// Intel's Quote Format: the header, the TD report body (TDX 1.0, and what 1.5 adds) and the SGX
// report body of the QE report, as [name, bytes].
const HEADER: Array<[string, number]> = [
  ['version', 2],
  ['attestation key type', 2],
  ['TEE type', 4],
  ['reserved', 4],
  ['QE vendor id', 16],
  ['user data', 20],
];
const TD10_BODY: Array<[string, number]> = [
  ['tee_tcb_svn', 16],
  ['mr_seam', 48],
  ['mr_signer_seam', 48],
  ['seam_attributes', 8],
  ['td_attributes', 8],
  ['xfam', 8],
  ['mr_td', 48],
  ['mr_config_id', 48],
  ['mr_owner', 48],
  ['mr_owner_config', 48],
  ['rtmr0', 48],
  ['rtmr1', 48],
  ['rtmr2', 48],
  ['rtmr3', 48],
  ['report_data', 64],
];
const TD15_EXTRA: Array<[string, number]> = [
  ['tee_tcb_svn2', 16],
  ['mr_service_td', 48],
];
const QE_REPORT: Array<[string, number]> = [
  ['cpu_svn', 16],
  ['misc_select', 4],
  ['reserved 1', 28],
  ['attributes', 16],
  ['mr_enclave', 32],
  ['reserved 2', 32],
  ['mr_signer', 32],
  ['reserved 3', 96],
  ['isv_prod_id', 2],
  ['isv_svn', 2],
  ['reserved 4', 60],
  ['report_data', 64],
];
const CHAIN_CHECKS = ['pck-chain-parse', 'pck-chain-signatures', 'root-pinned'];

/** Every field of the quote, end to end up to its trailing bytes, with the checks an edit of it must fail. */
function quoteFields(quote: Buffer): Field[] {
  const q = parseTdxQuote(quote);
  const fields: Field[] = [];
  let at = 0;
  const add = (name: string, size: number, want: string[], every = false) => {
    fields.push({ name, start: at, end: at + size, want, every });
    at += size;
  };
  const signed = ['quote-structure', 'quote-signature'];
  for (const [name, size] of HEADER) add(`header ${name}`, size, signed);
  if (q.version === 5) {
    add('body type', 2, signed);
    add('body size', 4, signed);
  }
  for (const [name, size] of q.body_type === 3 ? [...TD10_BODY, ...TD15_EXTRA] : TD10_BODY)
    add(`body ${name}`, size, signed);
  add('signature data length', 4, ['quote-structure']);
  // The verifier itself decodes these three (raw r || s, the key's x || y): every byte.
  add('quote signature', 64, ['quote-signature'], true);
  add('attestation key', 64, ['quote-signature', 'qe-report-binds-key'], true);
  add('certification data type', 2, ['quote-structure']);
  add('certification data size', 4, ['quote-structure']);
  for (const [name, size] of QE_REPORT) add(`QE report ${name}`, size, ['qe-report-signature']);
  add('QE report signature', 64, ['qe-report-signature'], true);
  add('QE auth data size', 2, ['quote-structure']);
  add('QE auth data', q.qe_auth_data.length, ['qe-report-binds-key']);
  add('PCK data type', 2, ['quote-structure']);
  add('PCK data size', 4, ['quote-structure']);
  const pem = quote.subarray(at, quote.length - q.trailing).toString('latin1');
  let line = 0;
  for (const m of pem.matchAll(/(-----BEGIN CERTIFICATE-----\n)([^-]*)(-----END CERTIFICATE-----\n?)|\0/g)) {
    if (m.index !== line) throw new Error(`the PCK chain has bytes between its certificates at ${line}`);
    const structure = ['quote-structure', ...CHAIN_CHECKS];
    if (m[1] === undefined || m[2] === undefined || m[3] === undefined) add('PCK chain NUL', 1, structure);
    else {
      add(`PCK chain BEGIN line ${m.index}`, m[1].length, structure);
      add(`PCK chain base64 ${m.index}`, m[2].length, structure);
      add(`PCK chain END line ${m.index}`, m[3].length, structure);
    }
    line = m.index + m[0].length;
  }
  if (at !== quote.length - q.trailing)
    throw new Error(`the fields end at ${at}, the quote at ${quote.length - q.trailing}`);
  return fields;
}

/** A PCK chain certificate as it lies in a quote: its DER, and where its base64 lines are. */
interface ChainCertificate {
  der: Buffer;
  /** The base64 text's offset in the quote, and the text with its line breaks. */
  base64At: number;
  base64: string;
}

function chainCertificates(quote: Buffer): ChainCertificate[] {
  const text = quote.toString('latin1');
  return [...text.matchAll(/-----BEGIN CERTIFICATE-----\n([^-]*)-----END/g)].map((m) => {
    const base64 = m[1] ?? '';
    return {
      der: Buffer.from(base64.replace(/\n/g, ''), 'base64'),
      base64At: (m.index ?? 0) + '-----BEGIN CERTIFICATE-----\n'.length,
      base64,
    };
  });
}

/** The quote with byte `i` of the certificate's DER flipped, its base64 written back in place, line breaks kept. */
function withCertificateByteFlipped(quote: Buffer, cert: ChainCertificate, i: number): Buffer {
  const encoded = flip(cert.der, i).toString('base64');
  const out = Buffer.from(quote);
  let k = 0;
  for (let j = 0; j < cert.base64.length; j++)
    if (cert.base64[j] !== '\n') out[cert.base64At + j] = encoded.charCodeAt(k++);
  if (k !== encoded.length) throw new Error('the re-encoded certificate is not as long as the original');
  return out;
}

/** The JSON tokens of a collateral response: each string's content, each number or literal; every byte of the signature. */
function jsonSpans(text: string): Span[] {
  const spans: Span[] = [];
  for (const m of text.matchAll(/"((?:[^"\\]|\\.)*)"|-?\d[\d.eE+-]*|true|false|null/g)) {
    const inner = m[1];
    const start = (m.index ?? 0) + (inner === undefined ? 0 : 1);
    const end = start + (inner ?? m[0]).length;
    if (end > start) spans.push({ name: `JSON ${inner ?? m[0]}`.slice(0, 40), start, end });
  }
  const signature = /"signature":"([0-9a-f]+)"/.exec(text);
  if (!signature?.[1]) throw new Error('no signature in the collateral');
  const at = signature.index + '"signature":"'.length;
  spans.push({ name: 'signature', start: at, end: at + signature[1].length, every: true });
  return spans;
}

describe('TDX verifier: an edited byte of any field fails and names the check', () => {
  // byte-flips.ts: each field's first and last byte (every byte of the signatures and the key the
  // verifier decodes itself) and a seeded sample; SVC_TEST_FLIPS=all flips every byte.
  const quotes = [
    ['v4', v4],
    ['v5', v5],
  ] as const;
  for (const [name, quote] of quotes) {
    it(
      `of the ${name} quote`,
      async () => {
        const fields = quoteFields(quote);
        const wantAt = (i: number) => fields.find((f) => f.start <= i && i < f.end)?.want ?? [];
        const end = fields.at(-1)?.end ?? 0;
        await expectEachFails(
          `${name} quote`,
          flips(`${name} quote`, end, fields, 32),
          async (i) => failed(await verifyTdx({ quote: flip(quote, i), collateral, now: AT })),
          wantAt,
        );
      },
      FLIPS_TIMEOUT_MS,
    );
  }

  // Each certificate of the PCK chains once (the v5 sample shares the v4 quote's CA and root),
  // flipped in its DER and written back as base64, so the PEM stays well formed.
  const seen = new Set<string>();
  for (const [name, quote] of quotes) {
    for (const cert of chainCertificates(quote)) {
      const key = cert.der.toString('hex');
      if (seen.has(key)) continue;
      seen.add(key);
      const subject = commonName(new x509.X509Certificate(cert.der).subject);
      it(
        `of the PCK chain's ${subject} (${name} quote)`,
        async () => {
          await expectEachFails(
            `${subject} certificate`,
            flips(`${name} ${subject}`, cert.der.length, derSpans(cert.der, subject), 16),
            async (i) =>
              failed(await verifyTdx({ quote: withCertificateByteFlipped(quote, cert, i), collateral, now: AT })),
            () => CHAIN_CHECKS,
          );
        },
        FLIPS_TIMEOUT_MS,
      );
    }
  }

  const signingDer = Buffer.from(x509.PemConverter.decode(signingPem)[0] as ArrayBuffer);
  const cases: Array<[string, (i: number) => Partial<TdxCollateral>, Span[], number, string[]]> = [
    [
      'TCB Info',
      (i) => ({ tcbInfo: flip(Buffer.from(collateral.tcbInfo), i).toString('latin1') }),
      jsonSpans(collateral.tcbInfo),
      collateral.tcbInfo.length,
      ['tcb-info-signature'],
    ],
    [
      'QE Identity',
      (i) => ({ qeIdentity: flip(Buffer.from(collateral.qeIdentity), i).toString('latin1') }),
      jsonSpans(collateral.qeIdentity),
      collateral.qeIdentity.length,
      ['qe-identity-signature'],
    ],
    [
      'PCK CRL',
      (i) => ({ pckCrl: flip(collateral.pckCrl, i) }),
      derSpans(collateral.pckCrl, 'PCK CRL'),
      collateral.pckCrl.length,
      ['crl-signatures'],
    ],
    [
      'root CRL',
      (i) => ({ rootCrl: flip(collateral.rootCrl, i) }),
      derSpans(collateral.rootCrl, 'root CRL'),
      collateral.rootCrl.length,
      ['crl-signatures'],
    ],
    [
      'TCB signing certificate',
      (i) => ({ tcbSigningChain: x509.PemConverter.encode(new Uint8Array(flip(signingDer, i)).buffer, 'CERTIFICATE') }),
      derSpans(signingDer, 'TCB signing certificate'),
      signingDer.length,
      ['tcb-signing-chain'],
    ],
  ];
  for (const [what, edit, spans, length, want] of cases) {
    it(
      `of the ${what}`,
      async () => {
        await expectEachFails(
          what,
          flips(what, length, spans, 16),
          async (i) => failed(await verifyTdx({ quote: v4, collateral: { ...collateral, ...edit(i) }, now: AT })),
          () => want,
        );
      },
      FLIPS_TIMEOUT_MS,
    );
  }
});

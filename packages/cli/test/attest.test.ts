import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSnpTestChain } from '@svc/protocol/attestation/testing';
import { main } from '../src/main.js';
import { spawnSvc } from './spawn.js';

// npm test: one store: the subject is `svc attest` over the vectors; it opens no store (main.ts's imports reach one).

const VECTORS = fileURLToPath(new URL('../../protocol/vectors/attestation/', import.meta.url));
const SNP = join(VECTORS, 'sev-snp');
const TDX = join(VECTORS, 'tdx');
const SIGNING = fileURLToPath(new URL('../../protocol/src/attestation/testdata/tcb_signing.pem', import.meta.url));

/** `svc attest ...` in this process with stdout captured (many cases; two run as real processes below). */
async function here(args: string[]): Promise<{ code: number; out: string }> {
  let out = '';
  const write = process.stdout.write.bind(process.stdout);
  const writeErr = process.stderr.write.bind(process.stderr);
  process.stdout.write = ((chunk: string | Uint8Array) => (
    (out += String(chunk)),
    true
  )) as typeof process.stdout.write;
  process.stderr.write = ((chunk: string | Uint8Array) => (
    (out += String(chunk)),
    true
  )) as typeof process.stderr.write;
  try {
    return { code: await main(['attest', ...args]), out };
  } finally {
    process.stdout.write = write;
    process.stderr.write = writeErr;
  }
}

const lines = (out: string) =>
  out
    .split('\n')
    .filter((l) => /^(PASS|FAIL) /.test(l))
    .map((l) => l.split(/\s+/).slice(0, 2).join(' '));

describe('svc attest verify', () => {
  let collateral: string;
  // The same collateral without a TCB signing chain (the vectors now ship Intel's, so the folder
  // itself no longer lacks one).
  let withoutChain: string;
  let scratch: string;
  beforeAll(() => {
    collateral = mkdtempSync(join(tmpdir(), 'svc-collateral-'));
    withoutChain = mkdtempSync(join(tmpdir(), 'svc-collateral-'));
    scratch = mkdtempSync(join(tmpdir(), 'svc-attest-'));
    for (const f of ['sample_tcbInfo_response', 'sample_qeIdentity_response', 'pckcrl', 'rootcrl.der']) {
      copyFileSync(join(TDX, f), join(collateral, f));
      copyFileSync(join(TDX, f), join(withoutChain, f));
    }
    copyFileSync(SIGNING, join(collateral, 'tcb_signing_chain.pem'));
  });
  afterAll(() => {
    rmSync(collateral, { recursive: true, force: true });
    rmSync(withoutChain, { recursive: true, force: true });
    rmSync(scratch, { recursive: true, force: true });
  });

  it('SEV-SNP vector, as a real process: one line per check, the debug policy fails it (exit 1)', async () => {
    const p = spawnSvc([
      'attest',
      'verify',
      '--sev-snp',
      join(SNP, 'attestation.bin'),
      '--vcek',
      join(SNP, 'vcek.testcer'),
      '--chain',
      join(SNP, 'ask_ark_milan.pem'),
    ]);
    expect(await p.exited).toBe(1);
    expect(lines(p.stdout())).toEqual([
      'PASS report-structure',
      'PASS vcek-parse',
      'PASS chain-parse',
      'PASS ark-pinned',
      'PASS ark-self-signed',
      'PASS ask-signed-by-ark',
      'PASS vcek-signed-by-ask',
      'PASS chain-validity',
      'PASS report-signature',
      'PASS vcek-tcb',
      'PASS vcek-chip-id',
      'FAIL policy-no-debug',
    ]);
    expect(p.stdout()).toContain(
      'measurement: b07af9620f3b839b47996422ddec6058338951d984e312115131ea82705eaf5b6bdf8a9ece31a5a608eb0cf2e4872b01',
    );
    expect(p.stdout()).toContain('tcb: bootloader=2 tee=0 snp=5 microcode=68');
    expect(p.stdout()).toContain('NOT VERIFIED: 1 of 12 checks failed');
  }, 60_000);

  it('TDX v4 vector, as a real process, at a date inside the collateral: prints the TCB status line and the failing level', async () => {
    const p = spawnSvc([
      'attest',
      'verify',
      '--tdx',
      join(TDX, 'tdx_prod_quote_SPR_E4.dat'),
      '--collateral',
      collateral,
      '--at',
      '2023-06-20',
    ]);
    expect(await p.exited).toBe(1);
    const got = lines(p.stdout());
    expect(got.filter((l) => l.startsWith('FAIL'))).toEqual(['FAIL tcb-status']);
    expect(got).toHaveLength(18);
    expect(p.stdout()).toContain('tcb_status: not evaluated');
    expect(p.stdout()).toContain(
      'mr_td: 6363b8043668a3ad953278e10389574d326c6749fb78aa810ecd9336923db86f22fc00b8dcd404bc10d5e119d7215cbb',
    );
  }, 60_000);

  it('TDX: dates outside the collateral fail the freshness checks; --json gives the same checks', async () => {
    const late = await here([
      'verify',
      '--tdx',
      join(TDX, 'tdx_prod_quote_SPR_E4.dat'),
      '--collateral',
      collateral,
      '--at',
      '2023-08-01',
      '--json',
    ]);
    expect(late.code).toBe(1);
    const parsed = JSON.parse(late.out) as {
      ok: boolean;
      checks: Array<{ name: string; ok: boolean }>;
      tcb_status: string;
    };
    expect(parsed.ok).toBe(false);
    expect(parsed.checks.filter((c) => !c.ok).map((c) => c.name)).toEqual([
      'crl-signatures',
      'tcb-info-current',
      'qe-identity-current',
      'tcb-status',
    ]);
  });

  it('a synthetic report under a test root fails ark-pinned and nothing else: the CLI trusts only the pinned AMD roots', async () => {
    const chain = await createSnpTestChain();
    const report = join(scratch, 'report.bin');
    writeFileSync(report, chain.signReport({ reportData: Buffer.alloc(64, 1) }));
    writeFileSync(join(scratch, 'vcek.der'), chain.vcekDer);
    writeFileSync(join(scratch, 'chain.pem'), chain.chainPem);
    const r = await here([
      'verify',
      '--sev-snp',
      report,
      '--vcek',
      join(scratch, 'vcek.der'),
      '--chain',
      join(scratch, 'chain.pem'),
    ]);
    expect(r.code).toBe(1);
    expect(lines(r.out).filter((l) => l.startsWith('FAIL'))).toEqual(['FAIL ark-pinned']);
  });

  it('--require-tcb adds a tcb-policy line that fails when the status is excluded', async () => {
    const r = await here([
      'verify',
      '--tdx',
      join(TDX, 'tdx_prod_quote_SPR_E4.dat'),
      '--collateral',
      collateral,
      '--at',
      '2023-06-20',
      '--require-tcb',
      'UpToDate,SWHardeningNeeded',
    ]);
    expect(r.code).toBe(1);
    expect(r.out).toContain('FAIL  tcb-policy  TCB status not evaluated is not one of UpToDate, SWHardeningNeeded');
  });

  it('bad usage exits 2 and says why', async () => {
    expect(await here(['verify', '--sev-snp', join(SNP, 'attestation.bin')])).toMatchObject({
      code: 2,
      out: expect.stringContaining('--sev-snp needs --vcek CERT'),
    });
    expect(await here(['verify', '--tdx', 'q', '--sev-snp', 'r'])).toMatchObject({
      code: 2,
      out: expect.stringContaining('exactly one of --sev-snp or --tdx'),
    });
    expect(
      await here(['verify', '--tdx', join(TDX, 'tdx_prod_quote_SPR_E4.dat'), '--collateral', withoutChain]),
    ).toMatchObject({
      code: 2,
      out: expect.stringContaining('tcb_signing_chain.pem'),
    });
    expect(await here(['verify', '--tdx', 'x', '--collateral', collateral, '--at', 'yesterday'])).toMatchObject({
      code: 2,
      out: expect.stringContaining('--at must be a date'),
    });
    expect(await here(['check'])).toMatchObject({ code: 2 });
  });
});

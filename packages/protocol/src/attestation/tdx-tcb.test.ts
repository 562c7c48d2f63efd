import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parsePemChain } from './checks.js';
import { parseTdxQuote } from './tdx-quote.js';
import {
  moduleLevel,
  pckExtensions,
  platformLevel,
  qeLevel,
  splitSigned,
  worstStatus,
  type QeIdentity,
  type TcbInfo,
} from './tdx-tcb.js';

const V = new URL('../../vectors/attestation/tdx/', import.meta.url);
const quote = parseTdxQuote(readFileSync(new URL('tdx_prod_quote_SPR_E4.dat', V)));
const info = splitSigned<TcbInfo>(readFileSync(new URL('sample_tcbInfo_response', V), 'utf8'), 'tcbInfo').value;
const identity = splitSigned<QeIdentity>(
  readFileSync(new URL('sample_qeIdentity_response', V), 'utf8'),
  'enclaveIdentity',
).value;
const [leaf] = parsePemChain(quote.pck_chain_pem);
if (!leaf) throw new Error('vector PCK');
const pck = pckExtensions(leaf);

describe('TDX TCB evaluation (the vector collateral)', () => {
  it("reads the PCK certificate's SGX extensions", () => {
    expect(pck).toMatchObject({ fmspc: '50806f000000', pce_id: '0000', pce_svn: 11 });
    expect(pck.components.slice(0, 8)).toEqual([3, 3, 2, 2, 2, 1, 0, 2]);
  });

  it('picks the first level the platform meets: UpToDate, then OutOfDate, then none', () => {
    const body = { ...quote.body, tee_tcb_svn: '03000500000000000000000000000000' };
    const newest = { ...pck, components: [5, 5, 2, 2, 3, 1, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0] };
    expect(platformLevel(info, newest, body)).toMatchObject({ status: 'UpToDate', advisories: [] });
    expect(platformLevel(info, { ...newest, pce_svn: 5 }, body)).toMatchObject({
      status: 'OutOfDate',
      advisories: expect.arrayContaining(['INTEL-SA-00106']),
    });
    expect(platformLevel(info, { ...newest, pce_svn: 4 }, body)).toContain('PCE SVN 4 < 11');
  });

  it('judges the TDX module (version 0) by tdxModule, and a major version by its identity', () => {
    expect(moduleLevel(info, quote.body)).toMatchObject({ status: 'UpToDate' });
    expect(moduleLevel(info, { ...quote.body, tee_tcb_svn: '03010400000000000000000000000000' })).toBe(
      'the TCB Info has no TDX module identity TDX_01',
    );
    expect(moduleLevel(info, { ...quote.body, mr_signer_seam: 'ff'.repeat(48) })).toContain('MRSIGNERSEAM');
  });

  it('matches the QE report against the QE Identity', () => {
    expect(qeLevel(identity, quote.qe_report)).toMatchObject({ status: 'UpToDate', detail: 'QE SVN 4 UpToDate' });
    expect(qeLevel(identity, { ...quote.qe_report, isv_svn: 3 })).toBe(
      'the QE SVN 3 meets no level of the QE Identity',
    );
    expect(qeLevel(identity, { ...quote.qe_report, mr_signer: '00'.repeat(32) })).toContain('MRSIGNER');
    expect(qeLevel(identity, { ...quote.qe_report, attributes: '1700000000000000e700000000000000' })).toContain(
      'attributes',
    );
  });

  it('combines statuses worst first', () => {
    expect(worstStatus(['UpToDate', 'SWHardeningNeeded'])).toBe('SWHardeningNeeded');
    expect(worstStatus(['OutOfDate', 'UpToDate', 'ConfigurationNeeded'])).toBe('OutOfDate');
    expect(worstStatus(['UpToDate'])).toBe('UpToDate');
  });
});

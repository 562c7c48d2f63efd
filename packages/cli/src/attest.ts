import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  formatSnpTcb,
  verifySevSnp,
  verifyTdx,
  type AttestationCheck,
  type TdxCollateral,
} from '@svc/protocol/attestation';
import { parseArgs, UsageError } from './args.js';
import { ATTEST_USAGE } from './usage.js';

async function readBytes(path: string, what: string): Promise<Buffer> {
  try {
    return await readFile(path);
  } catch (err) {
    throw new UsageError(`cannot read ${what} ${path}: ${err instanceof Error ? err.message : String(err)}`);
  }
}

async function collateralFrom(dir: string): Promise<TdxCollateral> {
  const pick = (names: string[]) => {
    const found = names.map((n) => join(dir, n)).find((p) => existsSync(p));
    if (!found) throw new UsageError(`--collateral ${dir} has none of ${names.join(', ')}`);
    return found;
  };
  return {
    tcbInfo: (await readBytes(pick(['tcb_info.json', 'sample_tcbInfo_response']), 'TCB Info')).toString('utf8'),
    qeIdentity: (await readBytes(pick(['qe_identity.json', 'sample_qeIdentity_response']), 'QE Identity')).toString(
      'utf8',
    ),
    tcbSigningChain: (await readBytes(pick(['tcb_signing_chain.pem']), 'TCB signing chain')).toString('utf8'),
    pckCrl: await readBytes(pick(['pck_crl.der', 'pckcrl']), 'PCK CRL'),
    rootCrl: await readBytes(pick(['root_crl.der', 'rootcrl.der']), 'root CRL'),
  };
}

function print(checks: AttestationCheck[], summary: Record<string, unknown>, json: boolean): boolean {
  const ok = checks.every((c) => c.ok);
  if (json) {
    process.stdout.write(`${JSON.stringify({ ok, ...summary, checks }, null, 2)}\n`);
    return ok;
  }
  for (const c of checks) process.stdout.write(`${c.ok ? 'PASS' : 'FAIL'}  ${c.name}  ${c.detail}\n`);
  process.stdout.write('\n');
  for (const [k, v] of Object.entries(summary)) process.stdout.write(`${k}: ${v === null ? '-' : String(v)}\n`);
  const failed = checks.filter((c) => !c.ok).length;
  process.stdout.write(
    ok
      ? `\nverified: all ${checks.length} checks passed\n`
      : `\nNOT VERIFIED: ${failed} of ${checks.length} checks failed\n`,
  );
  return ok;
}

/** `svc attest verify`: exit 0 when every check passes, 1 when one fails, 2 on bad usage. */
export async function attest(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub !== 'verify') throw new UsageError(`expected 'verify'\n\n${ATTEST_USAGE}`);
  const args = parseArgs(rest, {
    values: ['sev-snp', 'vcek', 'chain', 'tdx', 'collateral', 'at', 'require-tcb'],
    booleans: ['json'],
  });
  if (args.positionals.length > 0) throw new UsageError(`unexpected argument '${args.positionals[0]}'`);
  const f = (name: string) => (typeof args.flags[name] === 'string' ? (args.flags[name] as string) : undefined);
  const at = f('at');
  const now = at === undefined ? new Date() : new Date(at);
  if (Number.isNaN(now.getTime()))
    throw new UsageError(`--at must be a date (2023-06-20 or an ISO 8601 time), got '${at}'`);
  const json = args.flags.json === true;
  const snp = f('sev-snp');
  const tdx = f('tdx');
  if ((snp === undefined) === (tdx === undefined))
    throw new UsageError(`give exactly one of --sev-snp or --tdx\n\n${ATTEST_USAGE}`);

  if (snp !== undefined) {
    const vcek = f('vcek');
    if (!vcek) throw new UsageError('--sev-snp needs --vcek CERT');
    if (f('require-tcb') !== undefined)
      throw new UsageError('--require-tcb applies to TDX statuses; an SEV-SNP TCB is version numbers (printed)');
    const chain = f('chain');
    const v = await verifySevSnp({
      report: await readBytes(snp, 'report'),
      vcek: await readBytes(vcek, 'VCEK'),
      chain: chain ? (await readBytes(chain, 'chain')).toString('utf8') : undefined,
      now,
    });
    const r = v.report;
    const summary = {
      method: 'amd-sev-snp',
      product: v.product,
      measurement: r?.measurement ?? null,
      policy: r ? `0x${r.policy}` : null,
      chip_id: r?.chip_id ?? null,
      report_data: r?.report_data ?? null,
      tcb: r ? formatSnpTcb(r.reported_tcb) : null,
    };
    return print(v.checks, summary, json) ? 0 : 1;
  }

  const dir = f('collateral');
  if (!dir) throw new UsageError('--tdx needs --collateral DIR');
  const v = await verifyTdx({
    quote: await readBytes(tdx as string, 'quote'),
    collateral: await collateralFrom(dir),
    now,
  });
  const checks = [...v.checks];
  const required = f('require-tcb')
    ?.split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (required !== undefined) {
    const accepted = v.tcb_status !== null && required.includes(v.tcb_status);
    checks.push({
      name: 'tcb-policy',
      ok: accepted,
      detail: `TCB status ${v.tcb_status ?? 'not evaluated'} ${accepted ? 'is' : 'is not'} one of ${required.join(', ')}`,
    });
  }
  const body = v.quote?.body;
  const summary = {
    method: 'intel-tdx',
    tcb_status: v.tcb_status ?? 'not evaluated',
    advisories: v.advisories.join(',') || null,
    fmspc: v.fmspc,
    mr_td: body?.mr_td ?? null,
    rtmr0: body?.rtmrs[0] ?? null,
    rtmr1: body?.rtmrs[1] ?? null,
    rtmr2: body?.rtmrs[2] ?? null,
    rtmr3: body?.rtmrs[3] ?? null,
    report_data: body?.report_data ?? null,
  };
  return print(checks, summary, json) ? 0 : 1;
}

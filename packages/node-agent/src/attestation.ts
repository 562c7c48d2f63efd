import { randomBytes } from 'node:crypto';
import { mkdir, readFile, rmdir, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { NodeClient } from './client.js';

/**
 * Confidential-VM evidence from the kernel's configfs-tsm interface
 * (Documentation/ABI/testing/configfs-tsm): make an entry under `report/`, write the 64-byte
 * report_data to `inblob`, read the evidence from `outblob` (an SEV-SNP report or a TDX quote,
 * `provider` says which) and, for SEV-SNP, the host's certificate table from `auxblob`.
 */
export const TSM_REPORT_ROOT = '/sys/kernel/config/tsm/report';

export interface TsmReport {
  /** `sev_guest` or `tdx_guest`. */
  provider: string;
  outblob: Buffer;
  auxblob: Buffer | null;
}

async function readAttribute(path: string, deadline: number): Promise<Buffer> {
  // The kernel creates an entry's attributes with the entry; wait briefly for them rather than fail on a race.
  for (;;) {
    try {
      return await readFile(path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 10));
    }
  }
}

export async function tsmAvailable(root = TSM_REPORT_ROOT): Promise<boolean> {
  return stat(root).then(
    (s) => s.isDirectory(),
    () => false,
  );
}

/** One report for `reportData` (64 bytes); `root` is injectable for tests. */
export async function collectTsmReport(
  reportData: Buffer,
  options: { root?: string; timeoutMs?: number } = {},
): Promise<TsmReport> {
  if (reportData.length !== 64) throw new Error('report_data must be 64 bytes');
  const entry = join(options.root ?? TSM_REPORT_ROOT, `svc-${randomBytes(6).toString('hex')}`);
  const deadline = Date.now() + (options.timeoutMs ?? 5_000);
  await mkdir(entry);
  try {
    await writeFile(join(entry, 'inblob'), reportData);
    const generation = (await readAttribute(join(entry, 'generation'), deadline)).toString().trim();
    const outblob = await readAttribute(join(entry, 'outblob'), deadline);
    const provider = (await readAttribute(join(entry, 'provider'), deadline)).toString().trim();
    const auxblob = await readFile(join(entry, 'auxblob')).catch(() => null);
    // Another writer between our inblob and outblob would have bumped the generation.
    if ((await readFile(join(entry, 'generation'))).toString().trim() !== generation)
      throw new Error('configfs-tsm entry was written concurrently; try again');
    return { provider, outblob, auxblob: auxblob && auxblob.length > 0 ? auxblob : null };
  } finally {
    await rmdir(entry).catch(() => undefined);
  }
}

/** The VCEK GUID of the SEV-SNP certificate table (GHCB specification). */
const VCEK_GUID = '63da758d-e664-4564-adc5-f4b93be8accd';

function guidAt(b: Buffer, off: number): string {
  const h = (s: number, n: number, le: boolean) => {
    const part = Buffer.from(b.subarray(off + s, off + s + n));
    return (le ? part.reverse() : part).toString('hex');
  };
  return `${h(0, 4, true)}-${h(4, 2, true)}-${h(6, 2, true)}-${h(8, 2, false)}-${h(10, 6, false)}`;
}

/** The VCEK (DER) from an SEV-SNP certificate table (`auxblob`), or null when the host supplied none. */
export function vcekFromAuxblob(aux: Buffer): Buffer | null {
  for (let off = 0; off + 24 <= aux.length; off += 24) {
    const guid = guidAt(aux, off);
    if (/^[0-]+$/.test(guid)) return null;
    if (guid !== VCEK_GUID) continue;
    const start = aux.readUInt32LE(off + 16);
    const length = aux.readUInt32LE(off + 20);
    return start + length <= aux.length ? Buffer.from(aux.subarray(start, start + length)) : null;
  }
  return null;
}

export interface AttestationOutcome {
  verified: boolean;
  attestation: string;
  checks: Array<{ name: string; ok: boolean; detail: string }>;
  expires_at: string | null;
}

/**
 * Asks the server for a challenge, gets evidence bound to it from configfs-tsm and submits it
 * (docs/attestation.md). SEV-SNP needs the VCEK: from the host's certificate table, else
 * `vcekFile`. TDX needs Intel's collateral (`tdxCollateralDir`, the layout of `svc attest verify`).
 */
export async function attestWithTsm(
  client: NodeClient,
  options: { root?: string; vcekFile?: string; tdxCollateralDir?: string; signal?: AbortSignal } = {},
): Promise<AttestationOutcome> {
  const call = options.signal ? { signal: options.signal } : {};
  const c = (await client.signedRequest('POST', '/api/v1/node/attestation/challenge', undefined, call)) as {
    challenge: string;
    report_data: string;
  };
  const report = await collectTsmReport(Buffer.from(c.report_data, 'hex'), { root: options.root });
  let body: Record<string, unknown>;
  if (report.provider === 'sev_guest') {
    const vcek =
      (report.auxblob && vcekFromAuxblob(report.auxblob)) ??
      (options.vcekFile ? await readFile(options.vcekFile) : null);
    if (!vcek)
      throw new Error(
        'SEV-SNP: the host supplied no VCEK in the certificate table; give the VCEK file (from AMD KDS for this chip and TCB)',
      );
    body = {
      challenge: c.challenge,
      method: 2,
      sev_snp: { report: report.outblob.toString('base64'), vcek: vcek.toString('base64') },
    };
  } else if (report.provider === 'tdx_guest') {
    const dir = options.tdxCollateralDir;
    if (!dir)
      throw new Error(
        "TDX: give the directory of Intel's collateral for this platform (TCB Info, QE Identity, TCB signing chain, CRLs)",
      );
    const read = (name: string) => readFile(join(dir, name));
    body = {
      challenge: c.challenge,
      method: 1,
      tdx: {
        quote: report.outblob.toString('base64'),
        collateral: {
          tcb_info: (await read('tcb_info.json')).toString('utf8'),
          qe_identity: (await read('qe_identity.json')).toString('utf8'),
          tcb_signing_chain: (await read('tcb_signing_chain.pem')).toString('utf8'),
          pck_crl: (await read('pck_crl.der')).toString('base64'),
          root_crl: (await read('root_crl.der')).toString('base64'),
        },
      },
    };
  } else {
    throw new Error(`configfs-tsm provider '${report.provider}' is not one the server verifies (sev_guest, tdx_guest)`);
  }
  return (await client.signedRequest('POST', '/api/v1/node/attestation', body, call)) as AttestationOutcome;
}

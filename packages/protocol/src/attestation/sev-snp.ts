import { createPublicKey, verify as verifySignature } from 'node:crypto';
import type * as x509 from '@peculiar/x509';
import { AMD_ARK_PINS, AMD_CERT_CHAINS, type PinnedRoot } from './amd-roots.js';
import {
  CheckList,
  commonName,
  errorText,
  fingerprint,
  parseCertificate,
  parsePemChain,
  signatureVerifies,
  signedBy,
  toHex,
  validAt,
  type AttestationCheck,
} from './checks.js';
import { decodeUint, readTlv } from './der.js';

/**
 * AMD SEV-SNP attestation reports (SEV-SNP ABI specification, ATTESTATION_REPORT structure):
 * parse, then verify VCEK <- ASK <- ARK (RSA-PSS SHA-384) to a pinned ARK, the report's ECDSA
 * P-384 signature with the VCEK, the VCEK's TCB and hardware-id extensions against the report, and
 * that the guest is not debuggable.
 */
export const SNP_REPORT_SIZE = 0x4a0;
const SIGNED_SIZE = 0x2a0;
const POLICY_DEBUG = 1n << 19n;

/** A TCB_VERSION as Milan and Genoa lay it out (byte 0 boot loader, 1 TEE, 6 SNP, 7 microcode). */
export interface SnpTcb {
  bootloader: number;
  tee: number;
  snp: number;
  microcode: number;
  /** The 8 raw bytes, hex. */
  raw: string;
}

export interface SnpReport {
  version: number;
  guest_svn: number;
  /** The guest policy, 64-bit, hex without prefix. */
  policy: string;
  debug: boolean;
  family_id: string;
  image_id: string;
  vmpl: number;
  signature_algo: number;
  current_tcb: SnpTcb;
  platform_info: string;
  /** Bit 1 of the key-info word: the chip id is masked (all zero). */
  mask_chip_id: boolean;
  signing_key: number;
  report_data: string;
  measurement: string;
  host_data: string;
  id_key_digest: string;
  author_key_digest: string;
  report_id: string;
  report_id_ma: string;
  reported_tcb: SnpTcb;
  chip_id: string;
  committed_tcb: SnpTcb;
  launch_tcb: SnpTcb;
}

export interface SevSnpVerification {
  ok: boolean;
  checks: AttestationCheck[];
  report: SnpReport | null;
  /** The product whose pinned ARK anchored the chain (Milan, Genoa), or null. */
  product: string | null;
}

export interface SevSnpInput {
  report: Uint8Array;
  /** The VCEK, DER or PEM. */
  vcek: Uint8Array | string;
  /** ASK then ARK, PEM. Default: the embedded chain of the VCEK issuer's product. */
  chain?: string | undefined;
  /** The clock certificates' validity is judged against. */
  now?: Date | undefined;
  /** Extra trusted ARKs: for tests only, never set by a default build. */
  extraRoots?: readonly PinnedRoot[] | undefined;
}

function tcbAt(b: Buffer, off: number): SnpTcb {
  return {
    bootloader: b[off] as number,
    tee: b[off + 1] as number,
    snp: b[off + 6] as number,
    microcode: b[off + 7] as number,
    raw: b.subarray(off, off + 8).toString('hex'),
  };
}

/** Reads every field of a report; throws on a size the ABI does not define. */
export function parseSnpReport(bytes: Uint8Array): SnpReport {
  const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (b.length !== SNP_REPORT_SIZE) throw new Error(`report is ${b.length} bytes, the ABI's is ${SNP_REPORT_SIZE}`);
  const hex = (off: number, len: number) => b.subarray(off, off + len).toString('hex');
  const policy = b.readBigUInt64LE(0x08);
  const keyInfo = b.readUInt32LE(0x48);
  return {
    version: b.readUInt32LE(0x00),
    guest_svn: b.readUInt32LE(0x04),
    policy: policy.toString(16),
    debug: (policy & POLICY_DEBUG) !== 0n,
    family_id: hex(0x10, 16),
    image_id: hex(0x20, 16),
    vmpl: b.readUInt32LE(0x30),
    signature_algo: b.readUInt32LE(0x34),
    current_tcb: tcbAt(b, 0x38),
    platform_info: hex(0x40, 8),
    mask_chip_id: (keyInfo & 0b10) !== 0,
    signing_key: (keyInfo >> 2) & 0b111,
    report_data: hex(0x50, 64),
    measurement: hex(0x90, 48),
    host_data: hex(0xc0, 32),
    id_key_digest: hex(0xe0, 48),
    author_key_digest: hex(0x110, 48),
    report_id: hex(0x140, 32),
    report_id_ma: hex(0x160, 32),
    reported_tcb: tcbAt(b, 0x180),
    chip_id: hex(0x1a0, 64),
    committed_tcb: tcbAt(b, 0x1e0),
    launch_tcb: tcbAt(b, 0x1f0),
  };
}

/** The byte ranges the ABI reserves (must be zero) for a report version. */
function reservedRanges(version: number): Array<[number, number]> {
  const ranges: Array<[number, number]> = [
    [0x4c, 0x50],
    [0x1eb, 0x1ec],
    [0x1ef, 0x1f0],
    [SIGNED_SIZE + 144, SNP_REPORT_SIZE],
  ];
  // Version 3 added the CPUID family/model/stepping at 0x188-0x18a; version 5 the mitigation vectors at 0x1f8-0x207.
  ranges.push(version >= 3 ? [0x18b, 0x1a0] : [0x188, 0x1a0]);
  ranges.push(version >= 5 ? [0x208, SIGNED_SIZE] : [0x1f8, SIGNED_SIZE]);
  return ranges;
}

function checkStructure(b: Buffer, report: SnpReport): string | null {
  if (![2, 3, 5].includes(report.version)) return `version ${report.version} is not 2, 3 or 5`;
  if (report.signature_algo !== 1)
    return `signature algorithm ${report.signature_algo} is not 1 (ECDSA P-384 with SHA-384)`;
  if (report.signing_key !== 0) return `signing key ${report.signing_key} is not 0 (VCEK)`;
  if ((BigInt(`0x${report.policy}`) & (1n << 17n)) === 0n) return 'policy bit 17 (reserved, must be one) is zero';
  for (const [from, to] of reservedRanges(report.version)) {
    const at = b.subarray(from, to).findIndex((x) => x !== 0);
    if (at >= 0) return `reserved byte 0x${(from + at).toString(16)} is not zero`;
  }
  return null;
}

/** r and s are 72-byte little-endian fields; P-384 uses the low 48 bytes, the rest must be zero. */
function p1363Signature(b: Buffer): Buffer | null {
  const r = b.subarray(SIGNED_SIZE, SIGNED_SIZE + 72);
  const s = b.subarray(SIGNED_SIZE + 72, SIGNED_SIZE + 144);
  if (r.subarray(48).some((x) => x !== 0) || s.subarray(48).some((x) => x !== 0)) return null;
  return Buffer.concat([Buffer.from(r.subarray(0, 48)).reverse(), Buffer.from(s.subarray(0, 48)).reverse()]);
}

const TCB_OIDS: Array<[keyof Omit<SnpTcb, 'raw'>, string]> = [
  ['bootloader', '1.3.6.1.4.1.3704.1.3.1'],
  ['tee', '1.3.6.1.4.1.3704.1.3.2'],
  ['snp', '1.3.6.1.4.1.3704.1.3.3'],
  ['microcode', '1.3.6.1.4.1.3704.1.3.8'],
];
const HWID_OID = '1.3.6.1.4.1.3704.1.4';

function extensionValue(cert: x509.X509Certificate, oid: string): Uint8Array | null {
  const ext = cert.extensions.find((e) => e.type === oid);
  return ext ? new Uint8Array(ext.value) : null;
}

/** The hwID extension: 64 raw bytes, or an OCTET STRING of 64 bytes (both occur in AMD's VCEKs). */
function hardwareId(cert: x509.X509Certificate): string | null {
  const raw = extensionValue(cert, HWID_OID);
  if (!raw) return null;
  if (raw.length === 64) return toHex(raw);
  const tlv = readTlv(raw);
  return tlv.tag === 0x04 && tlv.end === raw.length && tlv.value.length === 64 ? toHex(tlv.value) : null;
}

function compareTcb(cert: x509.X509Certificate, reported: SnpTcb): string | null {
  const diffs: string[] = [];
  for (const [field, oid] of TCB_OIDS) {
    const raw = extensionValue(cert, oid);
    if (!raw) return `the VCEK has no ${field} extension (${oid})`;
    const tlv = readTlv(raw);
    if (tlv.end !== raw.length) return `the VCEK's ${field} extension has trailing bytes`;
    const value = decodeUint(tlv);
    if (value !== reported[field]) diffs.push(`${field} VCEK ${value} != report ${reported[field]}`);
  }
  return diffs.length ? diffs.join(', ') : null;
}

export function formatSnpTcb(t: SnpTcb): string {
  return `bootloader=${t.bootloader} tee=${t.tee} snp=${t.snp} microcode=${t.microcode}`;
}

/**
 * Verifies an SEV-SNP attestation report. Every step is a named check; `ok` only when all pass.
 *
 * @example
 * const v = await verifySevSnp({ report, vcek, now: new Date() });
 * v.checks.map((c) => `${c.ok ? 'ok' : 'FAIL'} ${c.name}`);
 */
export async function verifySevSnp(input: SevSnpInput): Promise<SevSnpVerification> {
  const list = new CheckList();
  const now = input.now ?? new Date();
  const done = (report: SnpReport | null, product: string | null): SevSnpVerification => ({
    ok: list.ok,
    checks: list.checks,
    report,
    product,
  });
  const b = Buffer.from(input.report.buffer, input.report.byteOffset, input.report.byteLength);

  let report: SnpReport;
  try {
    report = parseSnpReport(b);
  } catch (err) {
    list.add('report-structure', false, errorText(err));
    return done(null, null);
  }
  const bad = checkStructure(b, report);
  list.add(
    'report-structure',
    bad === null,
    bad ?? `version ${report.version}, ${b.length} bytes, ECDSA P-384, reserved bytes zero`,
  );

  let vcek: x509.X509Certificate;
  try {
    vcek = parseCertificate(input.vcek);
  } catch (err) {
    list.add('vcek-parse', false, `the VCEK is not an X.509 certificate: ${errorText(err)}`);
    return done(report, null);
  }
  list.add('vcek-parse', true, `${commonName(vcek.subject)} issued by ${commonName(vcek.issuer)}`);

  let ask: x509.X509Certificate | undefined;
  let ark: x509.X509Certificate | undefined;
  try {
    const product = /^SEV-(\w+)$/.exec(commonName(vcek.issuer))?.[1];
    const pem =
      input.chain ??
      (product ? (AMD_CERT_CHAINS[product] ?? input.extraRoots?.find((r) => r.product === product)?.chain) : undefined);
    if (!pem) throw new Error(`no chain given and no embedded chain for issuer ${commonName(vcek.issuer)}`);
    [ask, ark] = parsePemChain(pem);
    if (!ask || !ark) throw new Error('the chain must hold the ASK then the ARK');
  } catch (err) {
    list.add('chain-parse', false, errorText(err));
    return done(report, null);
  }
  list.add('chain-parse', true, `ASK ${commonName(ask.subject)}, ARK ${commonName(ark.subject)}`);

  const pins = [...AMD_ARK_PINS, ...(input.extraRoots ?? [])];
  const arkPrint = fingerprint(ark);
  const pin = pins.find((p) => p.fingerprint === arkPrint);
  list.add(
    'ark-pinned',
    pin !== undefined,
    pin ? `ARK-${pin.product} sha256:${arkPrint}` : `ARK sha256:${arkPrint} is not a pinned AMD root`,
  );
  list.add(
    'ark-self-signed',
    await signedBy(ark, ark),
    `${(ark.signatureAlgorithm as { name?: string }).name ?? 'signature'} over ${commonName(ark.subject)}`,
  );
  list.add(
    'ask-signed-by-ark',
    ask.issuer === ark.subject && (await signedBy(ask, ark)),
    `${commonName(ask.subject)} <- ${commonName(ark.subject)}`,
  );
  list.add(
    'vcek-signed-by-ask',
    vcek.issuer === ask.subject && (await signedBy(vcek, ask)),
    `${commonName(vcek.subject)} <- ${commonName(ask.subject)}`,
  );
  const expired = [vcek, ask, ark].filter((c) => !validAt(c, now)).map((c) => commonName(c.subject));
  list.add(
    'chain-validity',
    expired.length === 0,
    expired.length ? `not valid at ${now.toISOString()}: ${expired.join(', ')}` : `all valid at ${now.toISOString()}`,
  );

  const sig = p1363Signature(b);
  let sigOk = false;
  let sigDetail = 'r or s has non-zero bytes past the 48 P-384 uses';
  if (sig) {
    try {
      const spki = Buffer.from(vcek.publicKey.rawData);
      const signed = b.subarray(0, SIGNED_SIZE);
      sigOk = signatureVerifies('ecdsa-p384-sha384-p1363', spki, signed, sig, () => {
        const key = createPublicKey({ key: spki, format: 'der', type: 'spki' });
        return verifySignature('sha384', signed, { key, dsaEncoding: 'ieee-p1363' }, sig);
      });
      sigDetail = sigOk
        ? 'ECDSA P-384 SHA-384 by the VCEK over bytes 0x000-0x29f'
        : 'the signature does not verify under the VCEK';
    } catch (err) {
      sigDetail = `the VCEK's key is unusable: ${errorText(err)}`;
    }
  }
  list.add('report-signature', sigOk, sigDetail);

  try {
    const diff = compareTcb(vcek, report.reported_tcb);
    list.add('vcek-tcb', diff === null, diff ?? `reported TCB ${formatSnpTcb(report.reported_tcb)} matches the VCEK`);
  } catch (err) {
    list.add('vcek-tcb', false, errorText(err));
  }
  let hwid: string | null = null;
  try {
    hwid = hardwareId(vcek);
  } catch {
    hwid = null;
  }
  list.add(
    'vcek-chip-id',
    !report.mask_chip_id && hwid === report.chip_id,
    report.mask_chip_id
      ? 'the report masks its chip id'
      : hwid === null
        ? 'the VCEK has no 64-byte hwID extension'
        : hwid === report.chip_id
          ? `chip ${report.chip_id.slice(0, 16)}...`
          : "the report's chip id is not the VCEK's hwID",
  );
  list.add(
    'policy-no-debug',
    !report.debug,
    report.debug
      ? `policy 0x${report.policy} allows debugging (bit 19): the host can read the guest`
      : `policy 0x${report.policy}, debug disabled`,
  );
  return done(report, pin?.product ?? null);
}

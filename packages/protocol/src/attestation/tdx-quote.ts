/**
 * Intel TDX quotes, versions 4 and 5 (Intel TDX DCAP Quote Generation Library and Quote
 * Verification Library, "Quote Format"): header, TD report body (TDX 1.0 or 1.5), and the ECDSA
 * P-256 signature data with QE report certification data (type 6) wrapping the PCK chain (type 5).
 */
export const TDX_HEADER_SIZE = 48;
export const TD10_BODY_SIZE = 584;
export const TD15_BODY_SIZE = 648;
export const QE_REPORT_SIZE = 384;
/** Intel's QE vendor id: the quote was produced by Intel's quoting enclave. */
export const INTEL_QE_VENDOR_ID = '939a7233f79c4ca9940a0db3957f0607';

export interface TdReport {
  tee_tcb_svn: string;
  mr_seam: string;
  mr_signer_seam: string;
  seam_attributes: string;
  td_attributes: string;
  xfam: string;
  mr_td: string;
  mr_config_id: string;
  mr_owner: string;
  mr_owner_config: string;
  rtmrs: [string, string, string, string];
  report_data: string;
  /** TDX 1.5 bodies only. */
  tee_tcb_svn2?: string;
  mr_service_td?: string;
}

export interface QeReport {
  cpu_svn: string;
  misc_select: number;
  attributes: string;
  mr_enclave: string;
  mr_signer: string;
  isv_prod_id: number;
  isv_svn: number;
  report_data: string;
}

export interface TdxQuote {
  version: 4 | 5;
  attestation_key_type: number;
  tee_type: number;
  qe_vendor_id: string;
  user_data: string;
  /** 2 TDX 1.0, 3 TDX 1.5 (version 4 quotes carry 1.0 bodies without a type). */
  body_type: 2 | 3;
  body: TdReport;
  /** The bytes the attestation key signs: header and body (with v5's body descriptor). */
  signed: Buffer;
  signature: Buffer;
  attestation_key: Buffer;
  qe_report_raw: Buffer;
  qe_report: QeReport;
  qe_report_signature: Buffer;
  qe_auth_data: Buffer;
  pck_chain_pem: string;
  /** Bytes after the quote's own signature data: not part of the quote, never read. */
  trailing: number;
}

class Reader {
  constructor(
    private readonly b: Buffer,
    public off = 0,
  ) {}

  take(n: number, what: string): Buffer {
    if (this.off + n > this.b.length)
      throw new Error(`${what}: needs ${n} bytes at offset ${this.off}, the quote has ${this.b.length - this.off}`);
    const out = this.b.subarray(this.off, this.off + n);
    this.off += n;
    return out;
  }
  u16(what: string): number {
    return this.take(2, what).readUInt16LE(0);
  }
  u32(what: string): number {
    return this.take(4, what).readUInt32LE(0);
  }
}

function parseBody(b: Buffer, type: 2 | 3): TdReport {
  const hex = (o: number, n: number) => b.subarray(o, o + n).toString('hex');
  const body: TdReport = {
    tee_tcb_svn: hex(0, 16),
    mr_seam: hex(16, 48),
    mr_signer_seam: hex(64, 48),
    seam_attributes: hex(112, 8),
    td_attributes: hex(120, 8),
    xfam: hex(128, 8),
    mr_td: hex(136, 48),
    mr_config_id: hex(184, 48),
    mr_owner: hex(232, 48),
    mr_owner_config: hex(280, 48),
    rtmrs: [hex(328, 48), hex(376, 48), hex(424, 48), hex(472, 48)],
    report_data: hex(520, 64),
  };
  if (type === 3) {
    body.tee_tcb_svn2 = hex(584, 16);
    body.mr_service_td = hex(600, 48);
  }
  return body;
}

export function parseQeReport(b: Buffer): QeReport {
  return {
    cpu_svn: b.subarray(0, 16).toString('hex'),
    misc_select: b.readUInt32LE(16),
    attributes: b.subarray(48, 64).toString('hex'),
    mr_enclave: b.subarray(64, 96).toString('hex'),
    mr_signer: b.subarray(128, 160).toString('hex'),
    isv_prod_id: b.readUInt16LE(256),
    isv_svn: b.readUInt16LE(258),
    report_data: b.subarray(320, 384).toString('hex'),
  };
}

/** Parses a quote; throws, saying where, on anything its own lengths and types do not account for. */
export function parseTdxQuote(bytes: Uint8Array): TdxQuote {
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const r = new Reader(buf);
  const header = r.take(TDX_HEADER_SIZE, 'header');
  const version = header.readUInt16LE(0);
  if (version !== 4 && version !== 5) throw new Error(`quote version ${version} is not 4 or 5`);
  const attestationKeyType = header.readUInt16LE(2);
  if (attestationKeyType !== 2) throw new Error(`attestation key type ${attestationKeyType} is not 2 (ECDSA P-256)`);
  const teeType = header.readUInt32LE(4);
  if (teeType !== 0x81) throw new Error(`TEE type 0x${teeType.toString(16)} is not 0x81 (TDX)`);
  if (header.readUInt32LE(8) !== 0) throw new Error('header bytes 8-11 (reserved) are not zero');
  let bodyType: 2 | 3 = 2;
  let bodySize = TD10_BODY_SIZE;
  if (version === 5) {
    const t = r.u16('body type');
    if (t !== 2 && t !== 3) throw new Error(`body type ${t} is not 2 (TDX 1.0) or 3 (TDX 1.5)`);
    bodyType = t;
    bodySize = r.u32('body size');
    const expected = t === 2 ? TD10_BODY_SIZE : TD15_BODY_SIZE;
    if (bodySize !== expected) throw new Error(`body size ${bodySize} is not ${expected} for body type ${t}`);
  }
  const body = r.take(bodySize, 'TD report body');
  const signed = buf.subarray(0, r.off);
  const sigLen = r.u32('signature data length');
  const sigData = new Reader(r.take(sigLen, 'signature data'));
  const signature = sigData.take(64, 'quote signature');
  const attestationKey = sigData.take(64, 'attestation key');
  const certType = sigData.u16('certification data type');
  if (certType !== 6) throw new Error(`certification data type ${certType} is not 6 (QE report)`);
  const certSize = sigData.u32('certification data size');
  const cert = new Reader(sigData.take(certSize, 'QE report certification data'));
  if (sigData.off !== sigLen)
    throw new Error(`${sigLen - sigData.off} bytes of signature data follow the certification data`);
  const qeRaw = cert.take(QE_REPORT_SIZE, 'QE report');
  const qeSig = cert.take(64, 'QE report signature');
  const authLen = cert.u16('QE auth data size');
  const auth = cert.take(authLen, 'QE auth data');
  const innerType = cert.u16('PCK certification data type');
  if (innerType !== 5) throw new Error(`PCK certification data type ${innerType} is not 5 (PCK chain, PEM)`);
  const innerSize = cert.u32('PCK certification data size');
  const pem = cert.take(innerSize, 'PCK chain');
  if (cert.off !== certSize) throw new Error(`${certSize - cert.off} bytes follow the PCK chain`);
  // Some quoting libraries count a terminating NUL in the PEM's size; nothing else may follow it.
  const text = pem.toString('latin1').replace(/\0$/, '');
  if (!/^(-----BEGIN CERTIFICATE-----\n[A-Za-z0-9+/=\n]+-----END CERTIFICATE-----\n?)+$/.test(text))
    throw new Error('the PCK chain is not a PEM certificate list');
  return {
    version,
    attestation_key_type: attestationKeyType,
    tee_type: teeType,
    qe_vendor_id: header.subarray(12, 28).toString('hex'),
    user_data: header.subarray(28, 48).toString('hex'),
    body_type: bodyType,
    body: parseBody(body, bodyType),
    signed,
    signature,
    attestation_key: attestationKey,
    qe_report_raw: qeRaw,
    qe_report: parseQeReport(qeRaw),
    qe_report_signature: qeSig,
    qe_auth_data: auth,
    pck_chain_pem: text,
    trailing: buf.length - r.off,
  };
}

import type * as x509 from '@peculiar/x509';
import { toHex } from './checks.js';
import { children, decodeOid, decodeUint, readTlv } from './der.js';
import type { QeReport, TdReport } from './tdx-quote.js';

/**
 * Intel's TCB collateral (PCS API v4): the PCK certificate's SGX extensions, TDX TCB Info and the
 * TD QE Identity, and the evaluation of a quote's TCB status against them (the rules of Intel's
 * Quote Verification Library, simplified where noted).
 */
const SGX_EXTENSIONS = '1.2.840.113741.1.13.1';

export interface PckExtensions {
  fmspc: string;
  pce_id: string;
  /** The 16 SGX TCB component SVNs. */
  components: number[];
  pce_svn: number;
  cpu_svn: string;
}

/** What each parsed PCK certificate's extensions decode to (or fail with): @peculiar/x509 builds them anew on each read. */
const decoded = new WeakMap<x509.X509Certificate, PckExtensions | Error>();

export function pckExtensions(cert: x509.X509Certificate): PckExtensions {
  let known = decoded.get(cert);
  if (known === undefined) {
    try {
      known = readPckExtensions(cert);
    } catch (err) {
      known = err instanceof Error ? err : new Error(String(err));
    }
    decoded.set(cert, known);
  }
  if (known instanceof Error) throw known;
  return known;
}

function readPckExtensions(cert: x509.X509Certificate): PckExtensions {
  const ext = cert.extensions.find((e) => e.type === SGX_EXTENSIONS);
  if (!ext) throw new Error('the PCK certificate has no SGX extensions');
  const raw = new Uint8Array(ext.value);
  const seq = readTlv(raw);
  if (seq.tag !== 0x30 || seq.end !== raw.length) throw new Error('the SGX extensions are not one SEQUENCE');
  const out: Partial<PckExtensions> & { components: number[] } = { components: [] };
  for (const item of children(seq.value)) {
    const [oidTlv, value] = children(item.value);
    if (!oidTlv || !value || oidTlv.tag !== 0x06) throw new Error('an SGX extension entry is not {OID, value}');
    const oid = decodeOid(oidTlv.value);
    if (oid === `${SGX_EXTENSIONS}.4`) out.fmspc = toHex(value.value);
    else if (oid === `${SGX_EXTENSIONS}.3`) out.pce_id = toHex(value.value);
    else if (oid === `${SGX_EXTENSIONS}.2`) {
      for (const comp of children(value.value)) {
        const [cOid, cVal] = children(comp.value);
        if (!cOid || !cVal) throw new Error('a TCB component is not {OID, value}');
        const n = Number(decodeOid(cOid.value).slice(`${SGX_EXTENSIONS}.2.`.length));
        if (n >= 1 && n <= 16) out.components[n - 1] = decodeUint(cVal);
        else if (n === 17) out.pce_svn = decodeUint(cVal);
        else if (n === 18) out.cpu_svn = toHex(cVal.value);
      }
    }
  }
  if (
    !out.fmspc ||
    !out.pce_id ||
    out.pce_svn === undefined ||
    out.components.filter((c) => c !== undefined).length !== 16
  ) {
    throw new Error('the SGX extensions lack the FMSPC, PCE id, PCE SVN or a TCB component');
  }
  return out as PckExtensions;
}

/** Collateral as Intel's PCS serves it: `{"tcbInfo":{...},"signature":"<hex>"}`. */
export interface SignedCollateral<T> {
  /** The exact bytes the signature covers. */
  body: Buffer;
  value: T;
  signature: Buffer;
}

export function splitSigned<T>(text: string, key: 'tcbInfo' | 'enclaveIdentity'): SignedCollateral<T> {
  const m = new RegExp(`^\\{"${key}":(\\{.*\\}),"signature":"([0-9a-f]{128})"\\}\\n?$`, 's').exec(text);
  if (!m || m[1] === undefined || m[2] === undefined)
    throw new Error(`not a ${key} response ({"${key}":{...},"signature":"<128 hex>"})`);
  return { body: Buffer.from(m[1], 'utf8'), value: JSON.parse(m[1]) as T, signature: Buffer.from(m[2], 'hex') };
}

interface Svn {
  svn: number;
}
interface TcbLevel {
  tcb: { sgxtcbcomponents: Svn[]; pcesvn: number; tdxtcbcomponents: Svn[] };
  tcbDate: string;
  tcbStatus: string;
  advisoryIDs?: string[];
}
interface ModuleIdentity {
  id: string;
  mrsigner: string;
  attributes: string;
  attributesMask: string;
  tcbLevels: Array<{ tcb: { isvsvn: number }; tcbStatus: string; advisoryIDs?: string[] }>;
}
export interface TcbInfo {
  id: string;
  version: number;
  issueDate: string;
  nextUpdate: string;
  fmspc: string;
  pceId: string;
  tdxModule?: { mrsigner: string; attributes: string; attributesMask: string };
  tdxModuleIdentities?: ModuleIdentity[];
  tcbLevels: TcbLevel[];
}
export interface QeIdentity {
  id: string;
  version: number;
  issueDate: string;
  nextUpdate: string;
  miscselect: string;
  miscselectMask: string;
  attributes: string;
  attributesMask: string;
  mrsigner: string;
  isvprodid: number;
  tcbLevels: Array<{ tcb: { isvsvn: number }; tcbStatus: string; advisoryIDs?: string[] }>;
}

/** Worst first is the order statuses combine in: the result is the worst of platform, module and QE. */
export const TCB_STATUS_ORDER = [
  'UpToDate',
  'SWHardeningNeeded',
  'ConfigurationNeeded',
  'ConfigurationAndSWHardeningNeeded',
  'OutOfDate',
  'OutOfDateConfigurationNeeded',
  'Revoked',
];

export function worstStatus(statuses: string[]): string {
  return statuses.reduce(
    (a, b) => (TCB_STATUS_ORDER.indexOf(b) > TCB_STATUS_ORDER.indexOf(a) || !TCB_STATUS_ORDER.includes(b) ? b : a),
    'UpToDate',
  );
}

function maskedEqual(value: string, mask: string, expected: string): boolean {
  const v = Buffer.from(value, 'hex');
  const m = Buffer.from(mask, 'hex');
  const e = Buffer.from(expected, 'hex');
  return v.length === m.length && m.length === e.length && v.every((byte, i) => (byte & (m[i] as number)) === e[i]);
}

export interface LevelMatch {
  status: string;
  advisories: string[];
  detail: string;
}

/** The platform's level: the first whose SGX components, PCE SVN and TDX components the quote meets. */
export function platformLevel(info: TcbInfo, pck: PckExtensions, body: TdReport): LevelMatch | string {
  const teeSvn = Buffer.from(body.tee_tcb_svn, 'hex');
  // A TDX module with a major version (TEE_TCB_SVN[1] > 0) is judged by its own identity, not components 0-1.
  const from = (teeSvn[1] as number) > 0 ? 2 : 0;
  for (const level of info.tcbLevels) {
    const sgx = level.tcb.sgxtcbcomponents.every((c, i) => (pck.components[i] ?? -1) >= c.svn);
    const tdx = level.tcb.tdxtcbcomponents.every((c, i) => i < from || (teeSvn[i] ?? -1) >= c.svn);
    if (sgx && pck.pce_svn >= level.tcb.pcesvn && tdx) {
      return {
        status: level.tcbStatus,
        advisories: level.advisoryIDs ?? [],
        detail: `platform ${level.tcbStatus} (level of ${level.tcbDate})`,
      };
    }
  }
  const top = info.tcbLevels[0];
  const below = top
    ? [
        ...top.tcb.sgxtcbcomponents.flatMap((c, i) =>
          (pck.components[i] ?? -1) < c.svn ? [`SGX component ${i} ${pck.components[i]} < ${c.svn}`] : [],
        ),
        ...(pck.pce_svn < top.tcb.pcesvn ? [`PCE SVN ${pck.pce_svn} < ${top.tcb.pcesvn}`] : []),
        ...top.tcb.tdxtcbcomponents.flatMap((c, i) =>
          i >= from && (teeSvn[i] ?? -1) < c.svn ? [`TDX component ${i} ${teeSvn[i]} < ${c.svn}`] : [],
        ),
      ]
    : [];
  return `the platform meets no TCB level of the TCB Info (against the newest: ${below.join(', ') || 'none listed'}; Intel's QVL calls this TCB not supported)`;
}

/** The TDX module's identity: TDX_<major> from the TCB Info for major versions, else `tdxModule`. */
export function moduleLevel(info: TcbInfo, body: TdReport): LevelMatch | string {
  const teeSvn = Buffer.from(body.tee_tcb_svn, 'hex');
  const major = teeSvn[1] as number;
  if (major === 0) {
    const m = info.tdxModule;
    if (!m) return 'the TCB Info has no tdxModule';
    if (body.mr_signer_seam !== m.mrsigner.toLowerCase())
      return "the TDX module signer (MRSIGNERSEAM) is not the TCB Info's";
    if (!maskedEqual(body.seam_attributes, m.attributesMask, m.attributes))
      return 'the SEAM attributes do not match the TCB Info';
    return { status: 'UpToDate', advisories: [], detail: 'module version 0 matches tdxModule' };
  }
  const id = `TDX_${major.toString(16).padStart(2, '0').toUpperCase()}`;
  const identity = info.tdxModuleIdentities?.find((i) => i.id === id);
  if (!identity) return `the TCB Info has no TDX module identity ${id}`;
  if (body.mr_signer_seam !== identity.mrsigner.toLowerCase()) return `the TDX module signer is not ${id}'s`;
  if (!maskedEqual(body.seam_attributes, identity.attributesMask, identity.attributes))
    return `the SEAM attributes do not match ${id}`;
  const level = identity.tcbLevels.find((l) => (teeSvn[0] as number) >= l.tcb.isvsvn);
  if (!level) return `the TDX module SVN ${teeSvn[0]} meets no level of ${id}`;
  return { status: level.tcbStatus, advisories: level.advisoryIDs ?? [], detail: `module ${id} ${level.tcbStatus}` };
}

export function qeLevel(identity: QeIdentity, qe: QeReport): LevelMatch | string {
  const misc = Buffer.alloc(4);
  misc.writeUInt32LE(qe.misc_select >>> 0);
  const miscHex = Buffer.from(misc).reverse().toString('hex');
  if (!maskedEqual(miscHex, identity.miscselectMask, identity.miscselect))
    return 'the QE MISCSELECT does not match the QE Identity';
  if (!maskedEqual(qe.attributes, identity.attributesMask, identity.attributes))
    return 'the QE attributes do not match the QE Identity';
  if (qe.mr_signer !== identity.mrsigner.toLowerCase()) return "the QE signer (MRSIGNER) is not the QE Identity's";
  if (qe.isv_prod_id !== identity.isvprodid) return `the QE product id ${qe.isv_prod_id} is not ${identity.isvprodid}`;
  const level = identity.tcbLevels.find((l) => qe.isv_svn >= l.tcb.isvsvn);
  if (!level) return `the QE SVN ${qe.isv_svn} meets no level of the QE Identity`;
  return {
    status: level.tcbStatus,
    advisories: level.advisoryIDs ?? [],
    detail: `QE SVN ${qe.isv_svn} ${level.tcbStatus}`,
  };
}

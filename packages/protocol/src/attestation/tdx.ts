import { createHash, createPublicKey, verify as verifySignature, type KeyObject } from 'node:crypto';
import type * as x509 from '@peculiar/x509';
import {
  CheckList,
  commonName,
  errorText,
  fingerprint,
  parseDerCrl,
  parsePemChain,
  signatureVerifies,
  signedBy,
  validAt,
  type AttestationCheck,
} from './checks.js';
import { INTEL_SGX_ROOT_FINGERPRINT } from './intel-roots.js';
import { INTEL_QE_VENDOR_ID, parseTdxQuote, type TdxQuote } from './tdx-quote.js';
import {
  moduleLevel,
  pckExtensions,
  platformLevel,
  qeLevel,
  splitSigned,
  worstStatus,
  type LevelMatch,
  type PckExtensions,
  type QeIdentity,
  type TcbInfo,
} from './tdx-tcb.js';

/**
 * Verifies an Intel TDX quote (v4 or v5) offline: the PCK chain to the pinned Intel SGX Root CA
 * with both CRLs, the QE report's signature by the PCK key and its binding of the attestation key,
 * the quote's signature by that key, and the TCB status from TCB Info and QE Identity, whose own
 * signatures chain to the same root; every date against the injected clock.
 */
export interface TdxCollateral {
  /** The TCB Info response body, as served: `{"tcbInfo":{...},"signature":"..."}`. */
  tcbInfo: string;
  /** The QE Identity response body: `{"enclaveIdentity":{...},"signature":"..."}`. */
  qeIdentity: string;
  /** The TCB signing certificate (PEM; the root may follow it). */
  tcbSigningChain: string;
  /** DER CRL of the PCK Platform/Processor CA. */
  pckCrl: Uint8Array;
  /** DER CRL of the Intel SGX Root CA. */
  rootCrl: Uint8Array;
}

export interface TdxVerification {
  ok: boolean;
  checks: AttestationCheck[];
  quote: Omit<
    TdxQuote,
    | 'signed'
    | 'signature'
    | 'attestation_key'
    | 'qe_report_raw'
    | 'qe_report_signature'
    | 'qe_auth_data'
    | 'pck_chain_pem'
  > | null;
  /** The combined TCB status (the worst of platform, TDX module and QE), or null when not evaluated. */
  tcb_status: string | null;
  advisories: string[];
  fmspc: string | null;
}

export interface TdxInput {
  quote: Uint8Array;
  collateral: TdxCollateral;
  now?: Date | undefined;
  /** Extra trusted roots by fingerprint: for tests only, never set by a default build. */
  extraRootFingerprints?: readonly string[] | undefined;
}

function rawP256Key(xy: Buffer): KeyObject {
  return createPublicKey({
    key: {
      kty: 'EC',
      crv: 'P-256',
      x: xy.subarray(0, 32).toString('base64url'),
      y: xy.subarray(32, 64).toString('base64url'),
    },
    format: 'jwk',
  });
}

function spkiKey(spki: Uint8Array): KeyObject {
  return createPublicKey({ key: Buffer.from(spki), format: 'der', type: 'spki' });
}

/** ECDSA P-256 (IEEE P1363 signature) under the key `key` makes from `keyBytes`, remembered by the bytes. */
function p256Verifies(keyBytes: Uint8Array, key: (bytes: Uint8Array) => KeyObject, data: Buffer, sig: Buffer): boolean {
  return signatureVerifies('ecdsa-p256-sha256-p1363', keyBytes, data, sig, () => {
    try {
      return verifySignature('sha256', data, { key: key(keyBytes), dsaEncoding: 'ieee-p1363' }, sig);
    } catch {
      return false;
    }
  });
}

/** ECDSA P-256 under the certificate's key; false when the certificate's key does not even decode. */
function certVerifies(cert: x509.X509Certificate, data: Buffer, sig: Buffer): boolean {
  let spki: Uint8Array;
  try {
    spki = new Uint8Array(cert.publicKey.rawData);
  } catch {
    return false;
  }
  return p256Verifies(spki, spkiKey, data, sig);
}

const serial = (s: string) => s.toLowerCase().replace(/^0+/, '');

function current(what: string, issueDate: string, nextUpdate: string, now: Date): [boolean, string] {
  const from = Date.parse(issueDate);
  const to = Date.parse(nextUpdate);
  if (Number.isNaN(from) || Number.isNaN(to)) return [false, `${what} dates are not ISO 8601`];
  const ok = from <= now.getTime() && now.getTime() <= to;
  return [
    ok,
    `${what} issued ${issueDate}, next update ${nextUpdate}${ok ? '' : `: not current at ${now.toISOString()}`}`,
  ];
}

/**
 * @example
 * const v = await verifyTdx({ quote, collateral, now: new Date('2023-06-20T00:00:00Z') });
 * v.tcb_status; // 'UpToDate'
 */
export async function verifyTdx(input: TdxInput): Promise<TdxVerification> {
  const list = new CheckList();
  const now = input.now ?? new Date();
  const roots = [INTEL_SGX_ROOT_FINGERPRINT, ...(input.extraRootFingerprints ?? [])];
  let tcbStatus: string | null = null;
  let advisories: string[] = [];
  let pck: PckExtensions | null = null;
  let parsed: TdxQuote;
  const done = (q: TdxQuote | null): TdxVerification => {
    let view: TdxVerification['quote'] = null;
    if (q) {
      const {
        signed: _s,
        signature: _g,
        attestation_key: _a,
        qe_report_raw: _r,
        qe_report_signature: _q,
        qe_auth_data: _d,
        pck_chain_pem: _p,
        ...rest
      } = q;
      view = rest;
    }
    return {
      ok: list.ok,
      checks: list.checks,
      quote: view,
      tcb_status: tcbStatus,
      advisories,
      fmspc: pck?.fmspc ?? null,
    };
  };

  try {
    parsed = parseTdxQuote(input.quote);
  } catch (err) {
    list.add('quote-structure', false, errorText(err));
    return done(null);
  }
  const q = parsed;
  const vendorOk = q.qe_vendor_id === INTEL_QE_VENDOR_ID;
  list.add(
    'quote-structure',
    vendorOk,
    vendorOk
      ? `version ${q.version}, TD ${q.body_type === 3 ? '1.5' : '1.0'} body, ECDSA P-256, QE report certification data${q.trailing ? `; ${q.trailing} bytes after the quote are not part of it and ignored` : ''}`
      : `QE vendor id ${q.qe_vendor_id} is not Intel's`,
  );

  // The PCK chain: leaf, PCK Platform/Processor CA, pinned root.
  let chain: x509.X509Certificate[];
  try {
    chain = parsePemChain(q.pck_chain_pem);
    if (chain.length !== 3) throw new Error(`the PCK chain has ${chain.length} certificates, not 3 (PCK, CA, root)`);
  } catch (err) {
    list.add('pck-chain-parse', false, errorText(err));
    return done(q);
  }
  const [leaf, ca, root] = chain as [x509.X509Certificate, x509.X509Certificate, x509.X509Certificate];
  list.add(
    'pck-chain-parse',
    true,
    `${commonName(leaf.subject)} <- ${commonName(ca.subject)} <- ${commonName(root.subject)}`,
  );
  list.add(
    'root-pinned',
    roots.includes(fingerprint(root)),
    `root sha256:${fingerprint(root)}${roots.includes(fingerprint(root)) ? ' is the pinned Intel SGX Root CA' : ' is not pinned'}`,
  );
  const chainSigned =
    (await signedBy(root, root)) &&
    ca.issuer === root.subject &&
    (await signedBy(ca, root)) &&
    leaf.issuer === ca.subject &&
    (await signedBy(leaf, ca));
  list.add(
    'pck-chain-signatures',
    chainSigned,
    chainSigned
      ? 'root self-signed, CA <- root, PCK <- CA (ECDSA P-256)'
      : 'a signature or issuer name of the PCK chain does not verify',
  );
  const expired = chain.filter((c) => !validAt(c, now)).map((c) => commonName(c.subject));
  list.add(
    'pck-chain-validity',
    expired.length === 0,
    expired.length ? `not valid at ${now.toISOString()}: ${expired.join(', ')}` : `all valid at ${now.toISOString()}`,
  );

  // CRLs: the root's covers the CA, the CA's covers the PCK.
  try {
    const rootCrl = parseDerCrl(input.collateral.rootCrl);
    const pckCrl = parseDerCrl(input.collateral.pckCrl);
    const signed =
      rootCrl.issuer === root.subject &&
      (await signedBy(rootCrl, root)) &&
      pckCrl.issuer === ca.subject &&
      (await signedBy(pckCrl, ca));
    const stale = [rootCrl, pckCrl].filter(
      (c) =>
        !(
          c.thisUpdate.getTime() <= now.getTime() &&
          c.nextUpdate !== undefined &&
          now.getTime() <= c.nextUpdate.getTime()
        ),
    );
    list.add(
      'crl-signatures',
      signed && stale.length === 0,
      !signed
        ? 'a CRL is not signed by its issuer in the chain'
        : stale.length
          ? `a CRL is not current at ${now.toISOString()}`
          : `root CRL and ${commonName(pckCrl.issuer)} CRL signed and current`,
    );
    const revoked = [
      rootCrl.entries.some((e) => serial(e.serialNumber) === serial(ca.serialNumber)) && commonName(ca.subject),
      pckCrl.entries.some((e) => serial(e.serialNumber) === serial(leaf.serialNumber)) && 'the PCK certificate',
    ].filter(Boolean);
    list.add(
      'crl-not-revoked',
      revoked.length === 0,
      revoked.length
        ? `revoked: ${revoked.join(', ')}`
        : `neither the CA nor the PCK certificate is revoked (${pckCrl.entries.length} PCK revocations listed)`,
    );
  } catch (err) {
    list.add('crl-signatures', false, `a CRL does not parse: ${errorText(err)}`);
  }

  list.add(
    'qe-report-signature',
    certVerifies(leaf, q.qe_report_raw, q.qe_report_signature),
    'ECDSA P-256 over the QE report by the PCK key',
  );
  const binding = createHash('sha256').update(q.attestation_key).update(q.qe_auth_data).digest('hex');
  const bound = q.qe_report.report_data === binding + '00'.repeat(32);
  list.add(
    'qe-report-binds-key',
    bound,
    bound
      ? 'QE report_data = SHA-256(attestation key || QE auth data) || zeros'
      : 'the QE report does not bind the attestation key',
  );
  list.add(
    'quote-signature',
    p256Verifies(q.attestation_key, (xy) => rawP256Key(Buffer.from(xy)), q.signed, q.signature),
    `ECDSA P-256 over header and body (${q.signed.length} bytes) by the attestation key`,
  );
  const debug = ((Buffer.from(q.body.td_attributes, 'hex')[0] as number) & 1) === 1;
  list.add(
    'td-no-debug',
    !debug,
    debug ? 'TD attributes allow debugging (TUD.DEBUG)' : `TD attributes ${q.body.td_attributes}, debug disabled`,
  );

  // Collateral: its signing chain to the same root, its signatures and dates, then the TCB levels.
  let signer: x509.X509Certificate | null = null;
  try {
    const signing = parsePemChain(input.collateral.tcbSigningChain);
    const cert = signing[0];
    if (!cert || commonName(cert.subject) !== 'Intel SGX TCB Signing')
      throw new Error('the TCB signing chain does not start with the Intel SGX TCB Signing certificate');
    const tail = signing.slice(1);
    if (tail.some((c) => fingerprint(c) !== fingerprint(root)))
      throw new Error("the TCB signing chain holds a root other than the PCK chain's");
    const ok = cert.issuer === root.subject && (await signedBy(cert, root)) && validAt(cert, now);
    list.add(
      'tcb-signing-chain',
      ok,
      ok
        ? 'Intel SGX TCB Signing <- pinned root, valid'
        : `the TCB signing certificate is not signed by the root or not valid at ${now.toISOString()}`,
    );
    if (ok) signer = cert;
  } catch (err) {
    list.add('tcb-signing-chain', false, errorText(err));
  }

  let info: TcbInfo | null = null;
  let identity: QeIdentity | null = null;
  try {
    const s = splitSigned<TcbInfo>(input.collateral.tcbInfo, 'tcbInfo');
    const sigOk = signer !== null && certVerifies(signer, s.body, s.signature);
    list.add(
      'tcb-info-signature',
      sigOk,
      sigOk ? 'signed by Intel SGX TCB Signing' : 'the TCB Info signature does not verify (or no trusted signer)',
    );
    const [fresh, detail] = current('TCB Info', s.value.issueDate, s.value.nextUpdate, now);
    const shaped = s.value.id === 'TDX' && s.value.version === 3 && Array.isArray(s.value.tcbLevels);
    list.add(
      'tcb-info-current',
      fresh && shaped,
      shaped ? detail : `TCB Info id ${s.value.id} version ${s.value.version} is not TDX version 3`,
    );
    if (sigOk && shaped) info = s.value;
  } catch (err) {
    list.add('tcb-info-signature', false, errorText(err));
  }
  try {
    const s = splitSigned<QeIdentity>(input.collateral.qeIdentity, 'enclaveIdentity');
    const sigOk = signer !== null && certVerifies(signer, s.body, s.signature);
    list.add(
      'qe-identity-signature',
      sigOk,
      sigOk ? 'signed by Intel SGX TCB Signing' : 'the QE Identity signature does not verify (or no trusted signer)',
    );
    const [fresh, detail] = current('QE Identity', s.value.issueDate, s.value.nextUpdate, now);
    const shaped = s.value.id === 'TD_QE' && s.value.version === 2 && Array.isArray(s.value.tcbLevels);
    list.add(
      'qe-identity-current',
      fresh && shaped,
      shaped ? detail : `QE Identity id ${s.value.id} version ${s.value.version} is not TD_QE version 2`,
    );
    if (sigOk && shaped) identity = s.value;
  } catch (err) {
    list.add('qe-identity-signature', false, errorText(err));
  }

  try {
    pck = pckExtensions(leaf);
  } catch (err) {
    list.add('tcb-info-fmspc', false, errorText(err));
  }
  if (pck && info) {
    const same = pck.fmspc === info.fmspc.toLowerCase() && pck.pce_id === info.pceId.toLowerCase();
    list.add(
      'tcb-info-fmspc',
      same,
      same
        ? `FMSPC ${pck.fmspc}, PCE id ${pck.pce_id}`
        : `the PCK's FMSPC ${pck.fmspc} / PCE id ${pck.pce_id} is not the TCB Info's ${info.fmspc.toLowerCase()} / ${info.pceId}: this collateral cannot judge this platform`,
    );
    if (same) {
      const results: Array<[string, LevelMatch | string]> = [
        ['platform', platformLevel(info, pck, q.body)],
        ['module', moduleLevel(info, q.body)],
      ];
      if (identity) results.push(['qe', qeLevel(identity, q.qe_report)]);
      const failures = results.filter((r): r is [string, string] => typeof r[1] === 'string');
      if (failures.length === 0 && identity) {
        const matches = results.map((r) => r[1] as LevelMatch);
        tcbStatus = worstStatus(matches.map((m) => m.status));
        advisories = [...new Set(matches.flatMap((m) => m.advisories))];
      }
      list.add(
        'tcb-status',
        tcbStatus !== null,
        tcbStatus !== null
          ? `${tcbStatus}: ${results.map((r) => (r[1] as LevelMatch).detail).join('; ')}`
          : failures.map((f) => f[1]).join('; ') || 'no trusted QE Identity',
      );
    }
  }
  if (!list.checks.some((c) => c.name === 'tcb-status'))
    list.add('tcb-status', false, 'not evaluated: no trusted TCB Info for this platform');
  return done(q);
}

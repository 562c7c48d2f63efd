import {
  formatSnpTcb,
  verifySevSnp,
  verifyTdx,
  type AttestationCheck,
  type PinnedRoot,
  type TdxCollateral,
} from '@svc/protocol/attestation';
import type { TeeConfig } from './config.js';

/**
 * Decides whether a node's confidential-computing evidence holds (docs/attestation.md). Only
 * nodes it verifies join the `sovereign` pool and take `requires_tee` work.
 *
 * Verified = the vendor verifier's checks (chain to the pinned AMD/Intel roots, signatures, the
 * evidence's own TCB checks) + the deployment's TCB policy (SVC_TEE_ACCEPTED_TCB) + the
 * measurement allowlist (SVC_TEE_MEASUREMENTS) + the binding of the evidence to a fresh
 * challenge and the node's key (report_data = SHA-512(challenge || node public key)).
 * NVIDIA Confidential Computing (method 3) plugs in here; no verifier for it ships (see the docs).
 */
export interface EvidenceInput {
  method: number;
  sevSnp?: { report: Buffer; vcek: Buffer; chain?: string | undefined } | undefined;
  tdx?: { quote: Buffer; collateral: TdxCollateral } | undefined;
  /** SHA-512(challenge || node public key): what the evidence's report_data must be. */
  expectedReportData: Buffer;
  now: Date;
}

export interface EvidenceVerdict {
  verified: boolean;
  checks: AttestationCheck[];
  /** SEV-SNP MEASUREMENT or TDX MRTD, hex. */
  measurement: string | null;
  /** TDX: Intel's TCB status; SEV-SNP: the VCEK-certified TCB versions. */
  tcb_status: string | null;
}

export interface AttestationVerifier {
  readonly name: string;
  /** A claim made at registration: unbound to any challenge, so the real verifier never accepts it. */
  verify(claim: { nodeId: string; method: number; evidence: string | undefined }): Promise<boolean>;
  verifyEvidence(input: EvidenceInput): Promise<EvidenceVerdict>;
}

export const ATTESTATION_METHODS: Record<number, string> = {
  0: 'none',
  1: 'intel-tdx',
  2: 'amd-sev-snp',
  3: 'nvidia-cc',
};

export interface VerifierOptions {
  /** Extra AMD ARKs to trust: tests only (a root they generate); never set by `svc serve`. */
  extraSnpRoots?: readonly PinnedRoot[];
  /** Extra Intel roots (SHA-256 fingerprints) to trust: tests only. */
  extraTdxRootFingerprints?: readonly string[];
}

/**
 * The verifier `svc serve` uses: the vendor verifiers of @svc/protocol/attestation under the
 * deployment's policy.
 *
 * @example
 * const verifier = createAttestationVerifier(config.tee);
 */
export function createAttestationVerifier(policy: TeeConfig, options: VerifierOptions = {}): AttestationVerifier {
  return {
    name:
      options.extraSnpRoots?.length || options.extraTdxRootFingerprints?.length
        ? 'vendor-roots+test-roots'
        : 'vendor-roots',
    verify: async () => false,
    async verifyEvidence(input) {
      let checks: AttestationCheck[];
      let measurement: string | null = null;
      let tcbStatus: string | null = null;
      let reportData: string | null = null;
      let tcbAccepted: AttestationCheck;
      if (input.method === 2 && input.sevSnp) {
        const v = await verifySevSnp({ ...input.sevSnp, now: input.now, extraRoots: options.extraSnpRoots });
        checks = v.checks;
        measurement = v.report?.measurement ?? null;
        reportData = v.report?.report_data ?? null;
        tcbStatus = v.report ? formatSnpTcb(v.report.reported_tcb) : null;
        // AMD certifies the TCB in the VCEK (checked above); a per-deployment SNP minimum is not configurable yet.
        const certified = v.checks.find((c) => c.name === 'vcek-tcb')?.ok === true;
        tcbAccepted = {
          name: 'tcb-policy',
          ok: certified,
          detail: certified ? `SEV-SNP TCB ${tcbStatus} certified by the VCEK` : "the reported TCB is not the VCEK's",
        };
      } else if (input.method === 1 && input.tdx) {
        const v = await verifyTdx({
          ...input.tdx,
          now: input.now,
          extraRootFingerprints: options.extraTdxRootFingerprints,
        });
        checks = v.checks;
        measurement = v.quote?.body.mr_td ?? null;
        reportData = v.quote?.body.report_data ?? null;
        tcbStatus = v.tcb_status;
        const ok = tcbStatus !== null && policy.acceptedTcb.includes(tcbStatus);
        tcbAccepted = {
          name: 'tcb-policy',
          ok,
          detail: `TCB status ${tcbStatus ?? 'not evaluated'} ${ok ? 'is' : 'is not'} accepted (SVC_TEE_ACCEPTED_TCB=${policy.acceptedTcb.join(',')})`,
        };
      } else {
        const what =
          input.method === 3
            ? 'NVIDIA CC evidence has no verifier yet'
            : `method ${input.method} needs its evidence (${input.method === 2 ? 'sev_snp' : 'tdx'})`;
        return {
          verified: false,
          checks: [{ name: 'evidence', ok: false, detail: what }],
          measurement: null,
          tcb_status: null,
        };
      }
      const allowed = measurement !== null && policy.measurements.includes(measurement);
      const expected = input.expectedReportData.toString('hex');
      const all = [
        ...checks,
        tcbAccepted,
        {
          name: 'measurement-allowed',
          ok: allowed,
          detail: allowed
            ? `${measurement} is in SVC_TEE_MEASUREMENTS`
            : `${measurement ?? 'no measurement'} is not in SVC_TEE_MEASUREMENTS (${policy.measurements.length} allowed)`,
        },
        {
          name: 'binding',
          ok: reportData === expected,
          detail:
            reportData === expected
              ? 'report_data = SHA-512(challenge || node public key)'
              : 'report_data is not SHA-512(challenge || node public key): the evidence was not made for this challenge and node',
        },
      ];
      return { verified: all.every((c) => c.ok), checks: all, measurement, tcb_status: tcbStatus };
    },
  };
}

/**
 * Decides whether a node's confidential-computing claim holds. Only nodes it verifies join the
 * `sovereign` pool and take `requires_tee` work.
 *
 * A real verifier checks the evidence a node submits against the hardware vendor's roots:
 * Intel TDX quotes (DCAP: the quote's signature chain to Intel's PCK certificates, TCB status,
 * MRTD/RTMR measurements against an allow-list), AMD SEV-SNP attestation reports (VCEK chain to
 * AMD's ARK/ASK, measurement and policy bits), NVIDIA Confidential Computing GPU reports (NRAS or
 * local verifier against NVIDIA's certificate chain). It plugs in here; none ships yet, so every
 * attestation claim is recorded as unverified.
 */
export interface AttestationVerifier {
  readonly name: string;
  verify(claim: { nodeId: string; method: number; evidence: string | undefined }): Promise<boolean>;
}

/** The default: records the claim, verifies nothing. */
export function createUnverifiedAttestation(): AttestationVerifier {
  return { name: 'none', verify: async () => false };
}

export const ATTESTATION_METHODS: Record<number, string> = { 0: 'none', 1: 'intel-tdx', 2: 'amd-sev-snp', 3: 'nvidia-cc' };

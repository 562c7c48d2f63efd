/**
 * What receipts and evidence of sovereign work say about the node's attestation. Here, with the
 * attestation module that reads it (`attestationSummary`), so that reading it depends on nothing
 * above (evidence re-exports it).
 */
export interface AttestationSummary {
  method: string;
  measurement: string | null;
  tcb_status: string | null;
  verified_at: string;
}

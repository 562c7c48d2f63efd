import { canonicalSha256Hex } from '@svc/protocol';
import type { Settlement } from '../billing/service.js';
import type { LedgerRow } from '../billing/store.js';
import type { AttestationSummary } from '../attestation/summary.js';
import type { EvidenceEvent } from './recorder.js';

/**
 * The events of DESIGN.md section 11, built from plain data (pure), so a job and a gateway
 * request describe routing, receipts and money in the same words.
 */

/** A node as the evidence describes it. */
export interface EvidenceNode {
  id: string;
  country: string | null;
  region: string | null;
  gpu_model: string | null;
  attestation_verified?: boolean;
  /** For sovereign work: the node's verified attestation when it did the work. */
  attestation?: AttestationSummary | null;
  pubkey?: string;
}

export type { AttestationSummary } from '../attestation/summary.js';

/** `pol_` + 16 hex of the SHA-256 of the policy's canonical JSON: equal policies, equal ids. */
export function policyId(policy: Record<string, unknown>): string {
  return `pol_${canonicalSha256Hex(policy).slice(0, 16)}`;
}

/** `id`: the policy's {@link policyId} when the caller has it already (it hashes the policy). */
export function policyEvaluated(
  policy: Record<string, unknown>,
  note: string,
  id: string = policyId(policy),
): EvidenceEvent {
  return {
    type: 'policy.evaluated',
    summary: `policy ${id}: ${note}`,
    metadata: { policy_id: id, ...policy, decision: 'accepted' },
    causedBy: [],
  };
}

export function ledgerHeld(holdId: string, cents: number, causedBy: string): EvidenceEvent {
  return {
    type: 'ledger.held',
    summary: `${cents} cents held until it ends`,
    metadata: { hold_id: holdId, amount_cents: cents },
    causedBy: [causedBy],
  };
}

function nodeFields(node: EvidenceNode) {
  return {
    node_id: node.id,
    country: node.country,
    region: node.region,
    gpu_model: node.gpu_model,
    attestation_verified: node.attestation_verified ?? null,
    ...(node.attestation ? { attestation: node.attestation } : {}),
  };
}

/** The routing decision and its reason, then the lease it produced (`job.assigned` / `request.assigned`). */
export function routed(
  node: EvidenceNode,
  decision: { reason: string; [k: string]: unknown },
  assigned: { type: string; work_id: string; attempt: number; [k: string]: unknown },
): EvidenceEvent[] {
  const where = [node.country, node.region].filter(Boolean).join('/') || 'unknown location';
  const { type, ...lease } = assigned;
  return [
    {
      type: 'routing.decided',
      summary: `routed to ${node.id} (${where}, ${node.gpu_model ?? 'no GPU'}): ${decision.reason}`,
      metadata: { ...nodeFields(node), ...decision },
      causedBy: ['policy.evaluated'],
    },
    {
      type,
      summary: `attempt ${assigned.attempt} leased to ${node.id} as ${assigned.work_id}`,
      metadata: { node_id: node.id, ...lease },
      causedBy: ['routing.decided'],
    },
  ];
}

/**
 * The runner and image a receipt's metadata names (issue 42: provenance): what the node says it
 * ran buyer code in. The server cannot recompute it, so it is labelled the node's claim.
 */
function executionClaim(
  metadata: Record<string, unknown> | undefined,
): { runner: string; image: string | null; source: 'node_claim' } | undefined {
  const runner = metadata?.runner;
  if (typeof runner !== 'string') return undefined;
  const image = metadata?.image;
  return {
    runner: runner.slice(0, 40),
    image: typeof image === 'string' ? image.slice(0, 200) : null,
    source: 'node_claim',
  };
}

/** What a receipt says, and that its SVC1 signature verified against the node's registered key. */
export function receiptEvents(
  receipt: {
    id: string;
    job_id: string;
    node_public_key: string;
    result_hash: string;
    metering_units: number;
    signature: string;
    signature_version: string;
    metadata?: Record<string, unknown>;
  },
  node: EvidenceNode,
  workId: string,
): EvidenceEvent[] {
  const ran = executionClaim(receipt.metadata);
  const signed = {
    job_id: receipt.job_id,
    node_public_key: receipt.node_public_key,
    result_hash: receipt.result_hash,
    metering_units: receipt.metering_units,
    signature: receipt.signature,
  };
  return [
    {
      type: 'receipt.submitted',
      summary: `node ${node.id} submitted receipt ${receipt.id} for ${receipt.metering_units} units${ran ? ` (ran in the ${ran.runner} runner${ran.image ? `, image ${ran.image}` : ''}: the node's claim)` : ''}`,
      metadata: { receipt_id: receipt.id, work_id: workId, ...nodeFields(node), ...(ran ? { execution: ran } : {}) },
      causedBy: [],
    },
    {
      type: 'receipt.verified',
      summary: `${receipt.signature_version} signature verified against the registered key of ${node.id}`,
      metadata: { receipt_id: receipt.id, signature_version: receipt.signature_version, ...signed },
      causedBy: ['receipt.submitted'],
    },
  ];
}

const rowOf = (row: LedgerRow | null | undefined) =>
  row
    ? {
        transaction_id: row.id,
        amount_cents: row.amount_cents,
        amount_micro: row.amount_micro,
        free_micro: row.free_micro,
        balance_after: row.balance_after,
        tx_type: row.tx_type,
      }
    : null;

/** The settlement of a hold: what was charged, released, and what the operator earned. */
export function ledgerCharged(
  holdId: string | null,
  settlement: Pick<Settlement, 'charged_cents' | 'released_cents' | 'transaction'> &
    Partial<Pick<Settlement, 'charged_micro'>>,
  earning: LedgerRow | null,
  causedBy: string,
): EvidenceEvent {
  return {
    type: 'ledger.charged',
    // Without a hold (a gateway request: DESIGN.md section 7) nothing was held, so nothing is released.
    summary: `charged ${settlement.charged_cents} cents${holdId === null ? '' : `, released ${settlement.released_cents}`}${earning ? `, operator earned ${earning.amount_cents}` : ''}`,
    metadata: {
      hold_id: holdId,
      charged_cents: settlement.charged_cents,
      charged_micro: settlement.charged_micro ?? null,
      released_cents: settlement.released_cents,
      charge: rowOf(settlement.transaction),
      operator_earning: rowOf(earning),
    },
    causedBy: [causedBy],
  };
}

/**
 * A settled charge taken back (billing/reversal.ts): the buyer's refund, the operator's earning
 * reversal, and the cents of it the operator's balance no longer held (withheld from its payouts).
 */
export function ledgerReversed(
  jobId: string,
  reversal: { refunds: LedgerRow[]; earning_reversals: LedgerRow[]; owed_cents: number },
  reason: string,
  causedBy: string,
): EvidenceEvent {
  const refunded = reversal.refunds.reduce((sum, r) => sum + r.amount_cents, 0);
  const taken = -reversal.earning_reversals.reduce((sum, r) => sum + r.amount_cents, 0);
  return {
    type: 'ledger.reversed',
    summary: `job ${jobId}'s charge reversed: ${refunded} cents refunded to the buyer, ${taken} cents of the operator's earning taken back${reversal.owed_cents > 0 ? `, ${reversal.owed_cents} owed` : ''}`,
    metadata: {
      job_id: jobId,
      reason: reason.slice(0, 400),
      refunded_cents: refunded,
      refunds: reversal.refunds.map(rowOf),
      earning_reversals: reversal.earning_reversals.map(rowOf),
      owed_cents: reversal.owed_cents,
    },
    causedBy: [causedBy],
  };
}

export function ledgerReleased(holdId: string | null, cents: number, causedBy: string): EvidenceEvent {
  return {
    type: 'ledger.released',
    summary: `hold released: ${cents} cents back to the balance, nothing charged`,
    metadata: { hold_id: holdId, released_cents: cents },
    causedBy: [causedBy],
  };
}

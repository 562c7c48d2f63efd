import type { Queryable } from '../../platform/db/index.js';
import type { Ledger } from '../billing/service.js';
import { ledgerReversed } from '../evidence/events.js';
import type { EvidenceEvent } from '../evidence/recorder.js';
import { lowerReputation, REFUSED_RECEIPT_PENALTY } from '../nodes/store.js';
import { PROVEN_FALSE, type Problem } from './recompute.js';

/**
 * What a node pays when the server proves its work order's report false ({@link PROVEN_FALSE}),
 * inside the transaction that fails the order: the order's job was settled on the node's receipt,
 * so its charge is reversed (the buyer refunded, the operator's earning taken back and never
 * payable: billing/reversal.ts), and the node loses the reputation a receipt refused over its
 * metering bound costs. Nothing for the server's own problems. Idempotent: a job reversed already
 * is not reversed again (and the caller holds the order's row lock).
 *
 * @example
 * const answer = await answerFalseReport(ctx.ledger, tx, { jobId, nodeId: job.node_id, problem });
 * events.push(...answer.events); // `ledger.reversed`, when a charge was reversed
 */
export async function answerFalseReport(
  ledger: Ledger,
  tx: Queryable,
  input: { jobId: string; nodeId: string | null; problem: Problem },
): Promise<{ events: EvidenceEvent[]; reputation: number | null }> {
  if (!PROVEN_FALSE[input.problem.kind]) return { events: [], reputation: null };
  const reversal = await ledger.within(tx).reverse(input.jobId, {
    description: `job ${input.jobId} reversed: node ${input.nodeId ?? 'unknown'}'s report was proven false (${input.problem.kind})`,
  });
  const reputation = input.nodeId ? await lowerReputation(tx, input.nodeId, REFUSED_RECEIPT_PENALTY) : undefined;
  return {
    events: reversal ? [ledgerReversed(input.jobId, reversal, input.problem.problem, 'capsule.finished')] : [],
    reputation: reputation ?? null,
  };
}

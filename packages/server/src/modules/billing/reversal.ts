import type { Queryable } from '../../platform/db/index.js';
import { ApiError } from '../../platform/errors.js';
import { applyRefund, clampPromo, earningReversal } from './rules.js';
import {
  insertLedgerRows,
  lockAccounts,
  repayDebt,
  reversibleRowsOf,
  updateAccount,
  type AccountRow,
  type LedgerRow,
  type NewLedgerRow,
} from './store.js';

/**
 * A charge taken back (docs/billing.md, "Reversals"): the work it paid for was proven false after
 * it was settled (a work order whose node the server caught lying, docs/work-orders.md).
 */

/** What `reverse` wrote: the buyer's refund, the operator's earning reversal, and what the operator owes. */
export interface Reversal {
  /** One `refund` per charge of the ref (a job has one). */
  refunds: LedgerRow[];
  /** One `earning_reversal` per earning of the ref. */
  earning_reversals: LedgerRow[];
  /**
   * Cents of the earnings the operators' balances no longer held (spent or paid out): added to their
   * debt (the rows' `debt_cents`), paid first from their next credits, and withheld from their payouts.
   */
  owed_cents: number;
  /** `debt_repayment` rows: a refund or the balance left paying a debt the organization had already. */
  repayments: LedgerRow[];
}

/**
 * Reverses every charge of `ref` and every earning on it, inside `tx`: a `refund` row gives the
 * buyer the exact charge back ({@link applyRefund}; its free-tier part back to the promotional
 * balance) and an `earning_reversal` row takes each earning back in full ({@link earningReversal}):
 * what the balance no longer has becomes debt. An organization in debt then pays it from what it
 * has free (a `debt_repayment` row, {@link repayDebt}). Every
 * account involved is locked first, in org id order; undefined when `ref` has no charge or was
 * reversed already, which is decided under those locks (a second call writes nothing).
 */
export async function reverseRef(tx: Queryable, ref: string, description: string): Promise<Reversal | undefined> {
  const seen = await reversibleRowsOf(tx, ref);
  if (!seen.some((r) => r.tx_type === 'charge')) return undefined;
  const accounts = await lockAccounts(
    tx,
    seen.map((r) => r.org_id),
  );
  // Read again under the locks: a reversal that committed while this one waited is seen now.
  const rows = await reversibleRowsOf(tx, ref);
  if (rows.some((r) => r.tx_type === 'refund' || r.tx_type === 'earning_reversal')) return undefined;
  const account = (orgId: string): AccountRow => {
    const found = accounts.get(orgId);
    if (!found) throw new ApiError('not_found', `organization ${orgId} has no credit account`);
    return found;
  };
  const written: NewLedgerRow[] = [];
  let owed = 0;
  for (const row of rows) {
    const before = account(row.org_id);
    let next: AccountRow;
    if (row.tx_type === 'charge') {
      const refund = applyRefund(-row.amount_micro, before.carry_micro);
      next = { ...before, balance_cents: before.balance_cents + refund.cents, carry_micro: refund.carryMicro };
      next = { ...next, promo_micro: clampPromo(before.promo_micro - row.free_micro, next) };
      written.push({
        orgId: row.org_id,
        txType: 'refund',
        amountCents: refund.cents,
        amountMicro: -row.amount_micro,
        freeMicro: -row.free_micro,
        balanceAfter: next.balance_cents,
        description,
        ref,
      });
    } else {
      const reversal = earningReversal(before, { cents: row.amount_cents, freeMicro: row.free_micro });
      next = reversal.account;
      owed += reversal.owedCents;
      written.push({
        orgId: row.org_id,
        txType: 'earning_reversal',
        amountCents: -reversal.cents,
        amountMicro: -row.amount_micro,
        freeMicro: -row.free_micro,
        debtCents: reversal.owedCents,
        balanceAfter: next.balance_cents,
        description: reversal.owedCents > 0 ? `${description} (${reversal.owedCents} cents owed)` : description,
        ref,
      });
    }
    accounts.set(row.org_id, next);
  }
  for (const orgId of new Set(rows.map((r) => r.org_id))) {
    const repaid = repayDebt(orgId, account(orgId), ref);
    if (repaid) {
      accounts.set(orgId, repaid.account);
      written.push(repaid.row);
    }
    await updateAccount(tx, orgId, account(orgId));
  }
  const inserted = await insertLedgerRows(tx, written);
  return {
    refunds: inserted.filter((r) => r.tx_type === 'refund'),
    earning_reversals: inserted.filter((r) => r.tx_type === 'earning_reversal'),
    owed_cents: owed,
    repayments: inserted.filter((r) => r.tx_type === 'debt_repayment'),
  };
}

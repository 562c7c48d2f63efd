import { centsToCad, MICRO_PER_CENT, microToCad } from '@svc/protocol';
import type { Db, Queryable } from '../../platform/db/index.js';
import { ApiError } from '../../platform/errors.js';
import { newId } from '../../platform/ids.js';
import { reclaimExpired, sumReservations } from './reservation-store.js';
import { chargeHold, releaseRow, closeHoldsMany, type CloseHold, type ClosedHold } from './settle-many.js';
import { fillDays, windowStart } from './series.js';
import { chargeReservedMany, type ReservedOutcome } from './charge-reserved.js';
import { reverseRef, type Reversal } from './reversal.js';
import {
  applyUsage,
  availableCents,
  cashCents,
  clampPromo,
  confirmPosting,
  freePart,
  insufficientCredits,
  MAX_USAGE_MICRO,
  operatorEarning,
  payableCents,
  payoutPosting,
  requireAmount,
  requireTxType,
  type Earning,
} from './rules.js';
import {
  closeHoldAndSetAccount,
  countLedger,
  earningTotals,
  findHold,
  insertHoldAndSetAccount,
  lockAccountForHold,
  insertLedgerRow,
  insertLedgerRows,
  ledgerByDay,
  listLedger,
  lockAccount,
  lockAccountOfHold,
  postCredit,
  readAccount,
  sumActiveHolds,
  sumDebtRows,
  sumLedger,
  updateAccount,
  type AccountRow,
  type HoldRow,
  type LedgerRow,
} from './store.js';

/** How a posting is labelled on the ledger. `ref` names what it belongs to (job, request, hold). */
export interface PostingOptions {
  /** `charge` unless told, for debits; required for credits (`topup`, `earning`, `refund`, ...). */
  txType?: string;
  description?: string;
  ref?: string | null;
}

export type { ClosedHold } from './settle-many.js';
export type { ReservedOutcome } from './charge-reserved.js';
export type { Reversal } from './reversal.js';

export interface Balance {
  balance_cents: number;
  held_cents: number;
  /** What the organization owes (a reversed earning its balance no longer held): paid first from its next credits. */
  debt_cents: number;
  /** balance - held - debt, never below zero. */
  available_cents: number;
  /** Sub-cent usage not yet posted, added to the next charge (0 to 9,999 micro-CAD). */
  carry_micro: number;
}

export interface Settlement {
  /** Whole cents moved (after the carry; may be 0). */
  charged_cents: number;
  /** The exact charge in micro-CAD (the usage, or the hold when the hold capped it). */
  charged_micro: number;
  /** The part of `charged_micro` paid with free-tier credit (spent first). */
  free_micro: number;
  released_cents: number;
  /** The charge row (written even when it moved 0 cents: `amount_micro` names the exact charge). */
  transaction: LedgerRow | null;
  /** The row closing the hold (`release`, `hold_cents` minus the hold). */
  release?: LedgerRow;
}

export interface Charge {
  charged_cents: number;
  charged_micro: number;
  free_micro: number;
  carry_micro: number;
  transaction: LedgerRow | null;
}

/** What `earn` credited: the earning split payable / promotional, and its ledger row. */
export interface EarningPosting extends Earning {
  transaction: LedgerRow;
}

/** What `payOut` debited: the payout's cents, and its ledger row. */
export interface PayoutPosting {
  cents: number;
  transaction: LedgerRow;
}

/** What `confirmCredit` turned from promotional into paid credit, and its ledger row. */
export interface Confirmation {
  /** The part of the amount confirmed that was still promotional credit (the rest had been spent). */
  confirmed_micro: number;
  transaction: LedgerRow;
}

/** The credit operations; each one is atomic and serialised per organization. */
export interface LedgerOperations {
  /**
   * Reserves `cents` for a job or request: out of this instance's credit reservation of the
   * organization first, the rest from the balance no instance reserved; 402
   * `insufficient_credits` when both together are short. A `hold` ledger row. `options.id` names
   * the hold when the caller wrote rows pointing at it first (a job's hold comes last in its
   * transaction, so the account row stays locked only for the hold and the commit).
   */
  hold(orgId: string, cents: number, ref?: string | null, options?: { id?: string }): Promise<{ holdId: string }>;
  /** Closes an active hold (else 409), charges `min(usage, hold)` with the carry, releases the rest. */
  settle(holdId: string, usageMicro: number, options?: PostingOptions): Promise<Settlement>;
  /**
   * `settle`, then `earn` for the operator `earn.orgId` on its charge, in one go: both accounts are
   * locked first, in org id order (as `reverse` and every batch lock them), where `settle` then
   * `earn` would lock the buyer's, then the operator's; two organizations each buying from the
   * other's nodes would wait on each other in a cycle on PostgreSQL.
   */
  settleAndEarn(
    holdId: string,
    usageMicro: number,
    options: PostingOptions,
    earn: { orgId: string; options: Omit<PostingOptions, 'txType'> },
  ): Promise<{ settlement: Settlement; earning: EarningPosting }>;
  /** Closes an active hold without charging (a closed hold is 409). */
  release(holdId: string): Promise<{ released_cents: number }>;
  /** Charges usage directly (no hold), with the carry; 402 when the available balance is short. */
  charge(orgId: string, usageMicro: number, options?: PostingOptions): Promise<Charge>;
  /**
   * Adds `cents` (> 0) to the balance with a positive ledger row. `freeMicro` is its promotional
   * part (a free-tier grant): it joins the promotional balance, spent first and never payable.
   */
  credit(
    orgId: string,
    cents: number,
    options: PostingOptions & { txType: string; freeMicro?: number },
  ): Promise<LedgerRow>;
  /**
   * Credits an operator organization its earning on a settled charge (the charge less the
   * platform fee): one `earning` row, even of 0 cents, whose `free_micro` is the part earned from
   * free-tier credit. That part is promotional credit for the operator, never payable.
   */
  earn(
    orgId: string,
    charge: Pick<Settlement, 'charged_micro' | 'free_micro' | 'charged_cents'>,
    options: Omit<PostingOptions, 'txType'>,
  ): Promise<EarningPosting>;
  /**
   * Debits the organization's payable earnings ({@link payableEarnings}), decided under its
   * account lock, as one `payout` row drawn from paid credit only: the promotional part of the
   * balance is left as it was (rules.ts, `payoutPosting`). Writes nothing, and returns undefined,
   * when they are below `minimumCents` (at least 1).
   */
  payOut(
    orgId: string,
    options: { minimumCents: number; description: string; ref: string },
  ): Promise<PayoutPosting | undefined>;
  /**
   * Turns up to `cents` of the organization's promotional credit into paid credit (an
   * administrator confirmed a payment the provider could not vouch for): one row of 0 cents
   * whose `free_micro` is minus the part turned (rules.ts, `confirmPosting`).
   */
  confirmCredit(orgId: string, cents: number, options: PostingOptions & { txType: string }): Promise<Confirmation>;
  balance(orgId: string): Promise<Balance>;
  /**
   * Closes many holds at once, exactly as `settle` (then `earn` when `earn` is set) or `release`
   * called for each entry in order would, with a constant number of statements (a flush of the
   * group-commit writer). Throws as those calls would, and then nothing is written.
   */
  closeMany(entries: readonly HoldClosing[]): Promise<ClosedHold[]>;
  /**
   * Charges without a hold (DESIGN.md section 7, revised 2026-11-27: gateway requests): each
   * entry's usage, capped at `capCents`, drawn from `instanceId`'s credit reservation of the
   * organization first (the maximum cost it set aside in memory), then from the unreserved
   * balance; cut to what both hold should they be short, never below zero. One charge row each,
   * and the operator's earning row when `earn` is set. Constant statements whatever the number
   * (billing/charge-reserved.ts); what this instance's reservations lost is told to them.
   */
  chargeReserved(charges: readonly ReservedCharging[]): Promise<ReservedOutcome[]>;
  /**
   * Takes back the charge of `ref` (a job whose work was proven false after it was settled): a
   * `refund` row gives the buyer the exact charge back, an `earning_reversal` row takes the
   * operator's earning out of its balance as far as the balance holds it and out of its payable
   * earnings in full (billing/reversal.ts). Undefined, writing nothing, when `ref` has no charge
   * or was reversed already: a second call reverses nothing twice.
   */
  reverse(ref: string, options: { description: string }): Promise<Reversal | undefined>;
}

/** One entry of `chargeReserved`. */
export interface ReservedCharging {
  orgId: string;
  /** The instance whose reservation set the maximum cost aside (null: none did). */
  instanceId: string | null;
  /** The exact usage in micro-CAD (> 0). */
  usageMicro: number;
  /** The maximum cost set aside, in cents: the charge never exceeds it. */
  capCents: number;
  options?: PostingOptions;
  earn?: { orgId: string; options: Omit<PostingOptions, 'txType'> };
}

/** One entry of `closeMany`: a hold charged `usageMicro` (crediting `earn` its earning), or released. */
export type HoldClosing =
  | {
      holdId: string;
      usageMicro: number;
      options?: PostingOptions;
      earn?: { orgId: string; options: Omit<PostingOptions, 'txType'> };
    }
  | { holdId: string; release: true };

export interface Ledger extends LedgerOperations {
  /** The same operations inside a transaction the caller already has open (no nested BEGIN). */
  within(tx: Queryable): LedgerOperations;
}

const MAX_DESCRIPTION = 500;

function posting(
  options: PostingOptions,
  defaultTxType: string,
): { txType: string; description: string; ref: string | null | undefined } {
  const txType = options.txType ?? defaultTxType;
  requireTxType(txType);
  const description = options.description ?? '';
  if (description.length > MAX_DESCRIPTION)
    throw new ApiError('invalid_request', `description must be at most ${MAX_DESCRIPTION} characters`);
  return { txType, description, ref: options.ref };
}

async function lockedAccount(q: Queryable, orgId: string): Promise<AccountRow> {
  const account = await lockAccount(q, orgId);
  if (!account) throw new ApiError('not_found', `organization ${orgId} has no credit account`);
  return account;
}

/** Locks the hold's account, then the hold, in the order every operation locks them; it must be active. */
async function lockedActiveHold(q: Queryable, holdId: string): Promise<{ hold: HoldRow; account: AccountRow }> {
  const account = await lockAccountOfHold(q, holdId);
  if (!account) throw new ApiError('not_found', `hold ${holdId} not found`);
  const hold = await findHold(q, holdId, true);
  if (!hold || hold.status !== 'active')
    throw new ApiError('conflict', `hold ${holdId} is already ${hold?.status ?? 'closed'}`);
  return { hold, account };
}

/** Which instance's reservations holds draw on, and who hears of what they drew (billing/reservations.ts). */
export interface LedgerReservations {
  instanceId: string;
  /** Told, once a hold's statement ran, that it took `cents` out of this instance's reservation of `orgId`. */
  drawn(orgId: string, cents: number): void;
}

function operations(
  run: <T>(fn: (q: Queryable) => Promise<T>) => Promise<T>,
  reservations?: LedgerReservations,
): LedgerOperations {
  return {
    hold: async (orgId, cents, ref = null, options = {}) => {
      requireAmount(cents, 'cents');
      return run(async (q) => {
        const instanceId = reservations?.instanceId ?? null;
        const account = await lockAccountForHold(q, orgId, instanceId);
        if (!account) throw new ApiError('not_found', `organization ${orgId} has no credit account`);
        const own = Number(account.own_reserved_cents);
        let free = availableCents(account);
        // Reservations of instances that stopped renewing them are the organization's again.
        if (own + free < cents) free += await reclaimExpired(q, orgId);
        if (own + free < cents) throw insufficientCredits(own + free, cents);
        const drawn = Math.min(own, cents);
        const holdId = options.id ?? newId('hold');
        await insertHoldAndSetAccount(
          q,
          { id: holdId, orgId, amountCents: cents, ref },
          { ...account, held_cents: account.held_cents + cents },
          { instanceId, drawn },
        );
        if (drawn > 0) reservations?.drawn(orgId, drawn);
        return { holdId };
      });
    },

    settle: async (holdId, usageMicro, options = {}) => {
      requireAmount(usageMicro, 'usage_micro', { max: MAX_USAGE_MICRO });
      const entry = posting(options, 'charge');
      return run(async (q) => {
        const { hold, account } = await lockedActiveHold(q, holdId);
        const charged = chargeHold(account, hold, usageMicro, entry);
        await closeHoldAndSetAccount(q, holdId, 'settled', hold.org_id, charged.next);
        const [transaction, release] = await insertLedgerRows(q, charged.rows);
        return {
          charged_cents: charged.chargedCents,
          charged_micro: charged.exact,
          free_micro: charged.free,
          released_cents: charged.released,
          transaction: transaction ?? null,
          ...(release ? { release } : {}),
        };
      });
    },

    settleAndEarn: (holdId, usageMicro, options, earn) =>
      run(async (q) => {
        const [closed] = await closeHoldsMany(q, closingsOf([{ holdId, usageMicro, options, earn }]));
        if (!closed || !('settlement' in closed) || !closed.earning) throw new Error('the hold was not settled');
        return { settlement: closed.settlement, earning: closed.earning };
      }),

    release: (holdId) =>
      run(async (q) => {
        const { hold, account } = await lockedActiveHold(q, holdId);
        await closeHoldAndSetAccount(q, holdId, 'released', hold.org_id, {
          ...account,
          held_cents: account.held_cents - hold.amount_cents,
        });
        await insertLedgerRow(q, releaseRow(hold, account.balance_cents));
        return { released_cents: hold.amount_cents };
      }),

    charge: async (orgId, usageMicro, options = {}) => {
      requireAmount(usageMicro, 'usage_micro', { max: MAX_USAGE_MICRO });
      const entry = posting(options, 'charge');
      return run(async (q) => {
        const account = await lockedAccount(q, orgId);
        const charged = applyUsage(usageMicro, account.carry_micro);
        const available = availableCents(account);
        if (available < charged.cents) throw insufficientCredits(available, charged.cents);
        const balance = account.balance_cents - charged.cents;
        const free = freePart(usageMicro, account.promo_micro);
        const next = { ...account, balance_cents: balance, carry_micro: charged.carryMicro };
        await updateAccount(q, orgId, { ...next, promo_micro: clampPromo(account.promo_micro - free, next) });
        const transaction = await insertLedgerRow(q, {
          ...entry,
          orgId,
          amountCents: -charged.cents,
          amountMicro: -usageMicro,
          freeMicro: -free,
          balanceAfter: balance,
        });
        return {
          charged_cents: charged.cents,
          charged_micro: usageMicro,
          free_micro: free,
          carry_micro: charged.carryMicro,
          transaction,
        };
      });
    },

    credit: async (orgId, cents, options) => {
      requireAmount(cents, 'cents', { min: 1 });
      const entry = posting(options, options.txType);
      const freeMicro = options.freeMicro ?? 0;
      requireAmount(freeMicro, 'free_micro', { max: cents * MICRO_PER_CENT });
      return run((q) => postCredit(q, { ...entry, orgId, cents, freeMicro }));
    },

    earn: async (orgId, charge, options) => {
      const entry = posting({ ...options, txType: 'earning' }, 'earning');
      const earning = operatorEarning({
        micro: charge.charged_micro,
        freeMicro: charge.free_micro,
        cents: charge.charged_cents,
      });
      return run(async (q) => {
        const transaction = await postCredit(q, {
          ...entry,
          orgId,
          cents: earning.cents,
          amountMicro: earning.micro,
          freeMicro: earning.freeMicro,
        });
        return { ...earning, transaction };
      });
    },

    payOut: async (orgId, options) => {
      const entry = posting({ ...options, txType: 'payout' }, 'payout');
      return run(async (q) => {
        const account = await lockedAccount(q, orgId);
        const cents = payableCents({ ...earnedFigures(await earningTotals(q, orgId)), cashCents: cashCents(account) });
        if (cents < Math.max(1, options.minimumCents)) return undefined;
        const next = payoutPosting(account, cents);
        await updateAccount(q, orgId, next);
        const transaction = await insertLedgerRow(q, {
          ...entry,
          orgId,
          amountCents: -cents,
          balanceAfter: next.balance_cents,
        });
        return { cents, transaction };
      });
    },

    confirmCredit: async (orgId, cents, options) => {
      requireAmount(cents, 'cents', { min: 1 });
      const entry = posting(options, options.txType);
      return run(async (q) => {
        const account = await lockedAccount(q, orgId);
        const { promoMicro, confirmedMicro } = confirmPosting(account.promo_micro, cents);
        await updateAccount(q, orgId, { ...account, promo_micro: promoMicro });
        const transaction = await insertLedgerRow(q, {
          ...entry,
          orgId,
          amountCents: 0,
          freeMicro: -confirmedMicro,
          balanceAfter: account.balance_cents,
        });
        return { confirmed_micro: confirmedMicro, transaction };
      });
    },

    closeMany: (entries) => run((q) => closeHoldsMany(q, closingsOf(entries))),

    chargeReserved: (charges) =>
      run(async (q) => {
        const outcomes = await chargeReservedMany(
          q,
          charges.map((c) => ({
            orgId: c.orgId,
            instanceId: c.instanceId,
            usageMicro: c.usageMicro,
            capCents: c.capCents,
            posting: posting(c.options ?? {}, 'charge'),
            ...(c.earn
              ? { earn: { orgId: c.earn.orgId, posting: posting({ ...c.earn.options, txType: 'earning' }, 'earning') } }
              : {}),
          })),
        );
        charges.forEach((c, i) => {
          const d = outcomes[i]?.drawn ?? 0;
          if (d > 0 && c.instanceId !== null && c.instanceId === reservations?.instanceId)
            reservations.drawn(c.orgId, d);
        });
        return outcomes;
      }),

    reverse: async (ref, options) => {
      const { description } = posting({ ...options, ref, txType: 'refund' }, 'refund');
      return run((q) => reverseRef(q, ref, description));
    },

    balance: (orgId) =>
      run(async (q) => {
        const account = await readAccount(q, orgId);
        if (!account) throw new ApiError('not_found', `organization ${orgId} has no credit account`);
        // The organization's own reservations are its credit, set aside for its requests: available to it.
        return {
          balance_cents: account.balance_cents,
          held_cents: account.held_cents,
          debt_cents: account.debt_cents,
          carry_micro: account.carry_micro,
          available_cents: availableCents({ ...account, reserved_cents: 0 }),
        };
      }),
  };
}

/** The payable earnings so far and what was paid out of them: `payableCents`' figures from the ledger's. */
function earnedFigures(totals: { earned_micro: number; free_micro: number; paid_out_cents: number }) {
  return { payableEarnedMicro: totals.earned_micro - totals.free_micro, paidOutCents: totals.paid_out_cents };
}

/** `closeMany`'s entries as the batch closings take them (amounts checked, postings named). */
function closingsOf(entries: readonly HoldClosing[]): CloseHold[] {
  return entries.map((e) => {
    if ('release' in e) return e;
    requireAmount(e.usageMicro, 'usage_micro', { max: MAX_USAGE_MICRO });
    const entry = posting(e.options ?? {}, 'charge');
    const earn = e.earn && {
      orgId: e.earn.orgId,
      posting: posting({ ...e.earn.options, txType: 'earning' }, 'earning'),
    };
    return { holdId: e.holdId, usageMicro: e.usageMicro, posting: entry, ...(earn ? { earn } : {}) };
  });
}

/**
 * The credit ledger over `db` (DESIGN.md section 7). Each operation runs in one transaction and
 * locks the organization's account row first, so concurrent operations on one organization
 * serialise and the balance never goes below zero. Amounts: cents on the ledger, micro-CAD for usage.
 *
 * @example
 * const ledger = createLedger(ctx.db);
 * const { holdId } = await ledger.hold(orgId, 250, jobId);          // 402 if available < 250
 * const s = await ledger.settle(holdId, 1_234_567, { description: `job ${jobId}` });
 * // s.charged_cents === 123 (the 4,567 micro-CAD left over is carried), s.released_cents === 127
 * await ledger.credit(orgId, 1_000, { txType: 'topup', description: 'card payment' });
 * await ctx.db.transaction(async (tx) => { await insertJob(tx, job); await ledger.within(tx).hold(orgId, 250, job.id); });
 */
export function createLedger(db: Db, reservations?: LedgerReservations): Ledger {
  const within = (q: Queryable) => operations((fn) => fn(q), reservations);
  return {
    ...operations((fn) => db.transaction(fn), reservations),
    // A balance is one statement, consistent by itself: no transaction around it (a request reads
    // one before it is routed, and BEGIN and COMMIT cost as much as the read).
    balance: within(db).balance,
    within,
  };
}

/** A ledger row as the API shows it (CreditTransaction, plus `ref` and the exact amounts). */
export function transactionRecord(row: LedgerRow) {
  return {
    id: row.id,
    tx_type: row.tx_type,
    amount_cents: row.amount_cents,
    amount_micro: row.amount_micro,
    amount: microToCad(row.amount_micro),
    free_micro: row.free_micro,
    hold_cents: row.hold_cents,
    debt_cents: row.debt_cents,
    balance_after: row.balance_after,
    description: row.description,
    ref: row.ref,
    created_at: row.created_at.toISOString(),
  };
}

/** `GET /billing/balance`: the figures in cents and their CAD twins, and the free tier granted. */
export async function balanceReport(ledger: Ledger, db: Queryable, orgId: string) {
  const account = await ledger.balance(orgId);
  const freeTier = await sumLedger(db, orgId, 'free_tier');
  return {
    currency: 'CAD' as const,
    balance_cents: account.balance_cents,
    balance: centsToCad(account.balance_cents),
    held_cents: account.held_cents,
    held: centsToCad(account.held_cents),
    available_cents: account.available_cents,
    available: centsToCad(account.available_cents),
    debt_cents: account.debt_cents,
    debt: centsToCad(account.debt_cents),
    free_tier_granted_cents: freeTier,
  };
}

/** One page of the organization's ledger, newest first, with the total row count. */
export async function transactionPage(db: Queryable, orgId: string, page: { limit: number; offset: number }) {
  const [rows, total] = await Promise.all([listLedger(db, orgId, page), countLedger(db, orgId)]);
  return { transactions: rows.map(transactionRecord), total, limit: page.limit, offset: page.offset };
}

/**
 * Checks the account against its rows: the balance equals the sum of the ledger, `held_cents` the
 * sum of active holds, `debt_cents` the sum of the rows' debt changes, and `0 <= held <= balance`.
 * For audits, monitoring and tests.
 *
 * @example
 * const r = await reconcileAccount(ctx.db, orgId);
 * if (!r.consistent) ctx.log.error(r, 'ledger out of balance');
 */
export async function reconcileAccount(db: Queryable, orgId: string) {
  const account = await readAccount(db, orgId);
  if (!account) throw new ApiError('not_found', `organization ${orgId} has no credit account`);
  const [ledgerSum, activeHolds, reservations, debtRows] = await Promise.all([
    sumLedger(db, orgId),
    sumActiveHolds(db, orgId),
    sumReservations(db, orgId),
    sumDebtRows(db, orgId),
  ]);
  const reserved = account.reserved_cents ?? 0;
  const consistent =
    account.balance_cents === ledgerSum &&
    account.held_cents === activeHolds &&
    reserved === reservations &&
    account.debt_cents === debtRows &&
    account.held_cents >= 0 &&
    account.held_cents + reserved <= account.balance_cents;
  return {
    ...account,
    ledger_sum_cents: ledgerSum,
    active_holds_cents: activeHolds,
    reservations_cents: reservations,
    debt_rows_cents: debtRows,
    consistent,
  };
}

/**
 * `GET /billing/spend`: what the organization spent and was credited per UTC day over the last
 * `days` days (today included), for the dashboard's chart.
 */
export async function spendSeries(db: Queryable, orgId: string, days: number, now = new Date()) {
  const since = windowStart(days, now);
  const series = fillDays(await ledgerByDay(db, orgId, since), days, now);
  return {
    currency: 'CAD' as const,
    days,
    since: since.toISOString(),
    series,
    total_spend_cents: series.reduce((sum, d) => sum + d.spend_cents, 0),
    total_credit_cents: series.reduce((sum, d) => sum + d.credit_cents, 0),
  };
}

/**
 * What payouts may pay an operator organization now (DESIGN.md section 7, docs/billing.md):
 * its earnings less the part earned from free-tier credit, less what was paid out, never more
 * than the paid (non-promotional) credit it has available: what a payout run would pay now
 * (`payOut` decides the same figure again under the account lock).
 *
 * @example
 * const { payable_cents } = await payableEarnings(ctx.db, orgId);
 */
export async function payableEarnings(db: Queryable, orgId: string) {
  const [account, totals] = await Promise.all([readAccount(db, orgId), earningTotals(db, orgId)]);
  if (!account) throw new ApiError('not_found', `organization ${orgId} has no credit account`);
  const figures = earnedFigures(totals);
  const cents = payableCents({ ...figures, cashCents: cashCents(account) });
  return {
    earned_micro: totals.earned_micro,
    non_payable_micro: totals.free_micro,
    payable_earned_micro: figures.payableEarnedMicro,
    paid_out_cents: totals.paid_out_cents,
    payable_cents: cents,
    payable: centsToCad(cents),
  };
}

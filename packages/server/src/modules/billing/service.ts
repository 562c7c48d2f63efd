import { centsToCad } from '@svc/protocol';
import type { Db, Queryable } from '../../platform/db/index.js';
import { ApiError } from '../../platform/errors.js';
import { newId } from '../../platform/ids.js';
import { fillDays, windowStart } from './series.js';
import { applyUsage, availableCents, insufficientCredits, MAX_USAGE_MICRO, requireAmount, requireTxType } from './rules.js';
import {
  closeHoldAndSetAccount,
  countLedger,
  findHold,
  insertHoldAndSetAccount,
  insertLedgerRow,
  ledgerByDay,
  listLedger,
  lockAccount,
  lockAccountOfHold,
  postCredit,
  readAccount,
  sumActiveHolds,
  sumLedger,
  sumUnpaidEarnings,
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

export interface Balance {
  balance_cents: number;
  held_cents: number;
  /** balance - held, never below zero. */
  available_cents: number;
  /** Sub-cent usage not yet posted, added to the next charge (0 to 9,999 micro-CAD). */
  carry_micro: number;
}

export interface Settlement {
  charged_cents: number;
  released_cents: number;
  /** The charge row; null when the usage came to less than a cent after the carry. */
  transaction: LedgerRow | null;
}

export interface Charge {
  charged_cents: number;
  carry_micro: number;
  transaction: LedgerRow | null;
}

/** The credit operations; each one is atomic and serialised per organization. */
export interface LedgerOperations {
  /** Reserves `cents` of the available balance; 402 `insufficient_credits` when it is short. No ledger row. */
  hold(orgId: string, cents: number, ref?: string | null): Promise<{ holdId: string }>;
  /** Closes an active hold (else 409), charges `min(usage, hold)` with the carry, releases the rest. */
  settle(holdId: string, usageMicro: number, options?: PostingOptions): Promise<Settlement>;
  /** Closes an active hold without charging (a closed hold is 409). */
  release(holdId: string): Promise<{ released_cents: number }>;
  /** Charges usage directly (no hold), with the carry; 402 when the available balance is short. */
  charge(orgId: string, usageMicro: number, options?: PostingOptions): Promise<Charge>;
  /** Adds `cents` (> 0) to the balance with a positive ledger row. */
  credit(orgId: string, cents: number, options: PostingOptions & { txType: string }): Promise<LedgerRow>;
  balance(orgId: string): Promise<Balance>;
}

export interface Ledger extends LedgerOperations {
  /** The same operations inside a transaction the caller already has open (no nested BEGIN). */
  within(tx: Queryable): LedgerOperations;
}

const MAX_DESCRIPTION = 500;

function posting(options: PostingOptions, defaultTxType: string): { txType: string; description: string; ref: string | null | undefined } {
  const txType = options.txType ?? defaultTxType;
  requireTxType(txType);
  const description = options.description ?? '';
  if (description.length > MAX_DESCRIPTION) throw new ApiError('invalid_request', `description must be at most ${MAX_DESCRIPTION} characters`);
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
  if (!hold || hold.status !== 'active') throw new ApiError('conflict', `hold ${holdId} is already ${hold?.status ?? 'closed'}`);
  return { hold, account };
}

function operations(run: <T>(fn: (q: Queryable) => Promise<T>) => Promise<T>): LedgerOperations {
  return {
    hold: async (orgId, cents, ref = null) => {
      requireAmount(cents, 'cents');
      return run(async (q) => {
        const account = await lockedAccount(q, orgId);
        const available = availableCents(account);
        if (available < cents) throw insufficientCredits(available, cents);
        const holdId = newId('hold');
        await insertHoldAndSetAccount(q, { id: holdId, orgId, amountCents: cents, ref }, { ...account, held_cents: account.held_cents + cents });
        return { holdId };
      });
    },

    settle: async (holdId, usageMicro, options = {}) => {
      requireAmount(usageMicro, 'usage_micro', { max: MAX_USAGE_MICRO });
      const entry = posting(options, 'charge');
      return run(async (q) => {
        const { hold, account } = await lockedActiveHold(q, holdId);
        const charged = applyUsage(usageMicro, account.carry_micro, hold.amount_cents);
        const balance = account.balance_cents - charged.cents;
        await closeHoldAndSetAccount(q, holdId, 'settled', hold.org_id, { balance_cents: balance, held_cents: account.held_cents - hold.amount_cents, carry_micro: charged.carryMicro });
        const transaction =
          charged.cents > 0
            ? await insertLedgerRow(q, { ...entry, orgId: hold.org_id, amountCents: -charged.cents, balanceAfter: balance, ref: entry.ref ?? hold.ref ?? hold.id })
            : null;
        return { charged_cents: charged.cents, released_cents: hold.amount_cents - charged.cents, transaction };
      });
    },

    release: (holdId) =>
      run(async (q) => {
        const { hold, account } = await lockedActiveHold(q, holdId);
        await closeHoldAndSetAccount(q, holdId, 'released', hold.org_id, { ...account, held_cents: account.held_cents - hold.amount_cents });
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
        await updateAccount(q, orgId, { ...account, balance_cents: balance, carry_micro: charged.carryMicro });
        const transaction = charged.cents > 0 ? await insertLedgerRow(q, { ...entry, orgId, amountCents: -charged.cents, balanceAfter: balance }) : null;
        return { charged_cents: charged.cents, carry_micro: charged.carryMicro, transaction };
      });
    },

    credit: async (orgId, cents, options) => {
      requireAmount(cents, 'cents', { min: 1 });
      const entry = posting(options, options.txType);
      return run(async (q) => {
        await lockedAccount(q, orgId);
        return postCredit(q, { ...entry, orgId, cents });
      });
    },

    balance: (orgId) =>
      run(async (q) => {
        const account = await readAccount(q, orgId);
        if (!account) throw new ApiError('not_found', `organization ${orgId} has no credit account`);
        return { ...account, available_cents: availableCents(account) };
      }),
  };
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
export function createLedger(db: Db): Ledger {
  const within = (q: Queryable) => operations((fn) => fn(q));
  return {
    ...operations((fn) => db.transaction(fn)),
    // A balance is one statement, consistent by itself: no transaction around it (a request reads
    // one before it is routed, and BEGIN and COMMIT cost as much as the read).
    balance: within(db).balance,
    within,
  };
}

/** A ledger row as the API shows it (CreditTransaction, plus `ref`). */
export function transactionRecord(row: LedgerRow) {
  return {
    id: row.id,
    tx_type: row.tx_type,
    amount_cents: row.amount_cents,
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
 * sum of active holds, and `0 <= held <= balance`. For audits, monitoring and tests.
 *
 * @example
 * const r = await reconcileAccount(ctx.db, orgId);
 * if (!r.consistent) ctx.log.error(r, 'ledger out of balance');
 */
export async function reconcileAccount(db: Queryable, orgId: string) {
  const account = await readAccount(db, orgId);
  if (!account) throw new ApiError('not_found', `organization ${orgId} has no credit account`);
  const [ledgerSum, activeHolds] = await Promise.all([sumLedger(db, orgId), sumActiveHolds(db, orgId)]);
  const consistent =
    account.balance_cents === ledgerSum && account.held_cents === activeHolds && account.held_cents >= 0 && account.held_cents <= account.balance_cents;
  return { ...account, ledger_sum_cents: ledgerSum, active_holds_cents: activeHolds, consistent };
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
 * What a payout may pay the organization now, in cents: its earnings not yet paid out (after the
 * platform fee), but never more than its available balance, since earnings are credited to the
 * balance and what was spent from it is no longer there to pay (DESIGN.md section 7).
 */
export async function payableCents(ledger: Ledger, db: Queryable, orgId: string): Promise<number> {
  const [unpaid, account] = await Promise.all([sumUnpaidEarnings(db, orgId), ledger.within(db).balance(orgId)]);
  return Math.max(0, Math.min(unpaid, account.available_cents));
}

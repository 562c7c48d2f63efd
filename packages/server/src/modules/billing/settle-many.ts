import { MICRO_PER_CENT } from '@svc/protocol';
import type { Queryable } from '../../platform/db/index.js';
import { ApiError } from '../../platform/errors.js';
import {
  applyUsage,
  clampPromo,
  freePart,
  MAX_USAGE_MICRO,
  operatorEarning,
  requireAmount,
  type Earning,
} from './rules.js';
import type { EarningPosting, Settlement } from './service.js';
import {
  ACCOUNT_COLUMNS,
  ledgerColumns,
  ledgerInsertFrom,
  repayDebt,
  type AccountRow,
  type HoldRow,
  type LedgerRow,
  type NewLedgerRow,
} from './store.js';

/**
 * Many holds closed in one go (`closeHoldsMany`: a flush of completions of gateway requests opened
 * with a hold, before 2026-11-28). Every
 * account involved is locked by one statement in a fixed order, the holds by a second, each
 * closing is computed in JS exactly as `settle`, `release` and `earn` compute it one after another
 * (in entry order, each seeing the accounts as the ones before left them), and the holds, the
 * accounts and the ledger rows are written by one statement.
 */

/** One hold to close: charged `usageMicro` (with the operator's earning when `earn` is set), or released. */
export type CloseHold =
  | {
      holdId: string;
      usageMicro: number;
      posting: { txType: string; description: string; ref: string | null | undefined };
      earn?: { orgId: string; posting: { description: string; ref: string | null | undefined } };
    }
  | { holdId: string; release: true };

/** What one closing did, as `settle` + `earn` (or `release`) return it. */
export type ClosedHold =
  { settlement: Settlement; earning: EarningPosting | null } | { released_cents: number; release: LedgerRow };

/**
 * Closes every hold of `entries` inside `tx`, as the entries' `settle`/`earn`/`release` calls
 * would one after another, with 3 statements whatever their number. Throws as those calls would
 * (409 for a hold that is not active, 404 for a missing account), writing nothing.
 */
export async function closeHoldsMany(tx: Queryable, entries: readonly CloseHold[]): Promise<ClosedHold[]> {
  if (entries.length === 0) return [];
  for (const e of entries) if ('usageMicro' in e) requireAmount(e.usageMicro, 'usage_micro', { max: MAX_USAGE_MICRO });
  const holdIds = entries.map((e) => e.holdId);
  const earners = entries.flatMap((e) => ('earn' in e && e.earn ? [e.earn.orgId] : []));
  // One fixed order (org id) for every account of the flush, so two flushes never wait on each other in a cycle.
  const { rows: locked } = await tx.query<AccountRow & { org_id: string }>(
    `SELECT org_id, ${ACCOUNT_COLUMNS} FROM credit_accounts
      WHERE org_id IN (SELECT org_id FROM credit_holds WHERE id = ANY($1::text[])) OR org_id = ANY($2::text[])
      ORDER BY org_id FOR UPDATE`,
    [holdIds, earners],
  );
  const { rows: holdRows } = await tx.query<HoldRow>(
    'SELECT id, org_id, amount_cents, ref, status FROM credit_holds WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE',
    [holdIds],
  );
  const accounts = new Map(locked.map(({ org_id, ...a }) => [org_id, { ...a }]));
  const holds = new Map(holdRows.map((h) => [h.id, { ...h }]));
  const rows: NewLedgerRow[] = [];
  const outcomes = computeClosings(accounts, holds, entries, rows);
  const written = await writeClosings(tx, [...holds.values()], [...accounts], rows);
  return outcomes.map((make) => make(written));
}

/**
 * The closings of `entries` in order, each seeing `accounts` and `holds` as the ones before left
 * them (both are updated in place): their ledger rows are appended to `rows`; returns, per entry,
 * how to make its outcome from the written rows. Throws as `settle`/`release` would.
 */
function computeClosings(
  accounts: Map<string, AccountRow>,
  holds: Map<string, HoldRow>,
  entries: readonly CloseHold[],
  rows: NewLedgerRow[],
): ((written: LedgerRow[]) => ClosedHold)[] {
  // Per entry: where its rows start in `rows`, and how to make its outcome from the written rows.
  const outcomes: ((written: LedgerRow[]) => ClosedHold)[] = [];
  for (const e of entries) {
    const hold = holds.get(e.holdId);
    const account = hold && accounts.get(hold.org_id);
    if (!hold || !account) throw new ApiError('not_found', `hold ${e.holdId} not found`);
    if (hold.status !== 'active') throw new ApiError('conflict', `hold ${e.holdId} is already ${hold.status}`);
    const first = rows.length;
    if ('release' in e) {
      hold.status = 'released';
      account.held_cents -= hold.amount_cents;
      rows.push(releaseRow(hold, account.balance_cents));
      const cents = hold.amount_cents;
      outcomes.push((written) => ({ released_cents: cents, release: at(written, first) }));
      continue;
    }
    const c = chargeHold(account, hold, e.usageMicro, e.posting);
    Object.assign(account, c.next);
    hold.status = 'settled';
    rows.push(...c.rows);
    const settlement = (written: LedgerRow[]): Settlement => ({
      charged_cents: c.chargedCents,
      charged_micro: c.exact,
      free_micro: c.free,
      released_cents: c.released,
      transaction: at(written, first),
      release: at(written, first + 1),
    });
    if (!e.earn) {
      outcomes.push((written) => ({ settlement: settlement(written), earning: null }));
      continue;
    }
    const earning = postEarning(accounts, e.earn, { micro: c.exact, freeMicro: c.free, cents: c.chargedCents }, rows);
    outcomes.push((written) => ({
      settlement: settlement(written),
      earning: { ...earning, transaction: at(written, first + 2) },
    }));
  }
  return outcomes;
}

/**
 * The operator's earning on a charge, computed in JS against `accounts` (the earner's balance and
 * promotional credit updated in place, as `postCredit` would) and its `earning` row appended to
 * `rows`, then, when the earner is in debt, the `debt_repayment` row the earning paid: the one
 * computation of every batch that credits earnings.
 */
export function postEarning(
  accounts: Map<string, AccountRow>,
  earn: { orgId: string; posting: { description: string; ref: string | null | undefined } },
  charge: { micro: number; freeMicro: number; cents: number },
  rows: NewLedgerRow[],
): Earning {
  const earner = accounts.get(earn.orgId);
  if (!earner) throw new ApiError('not_found', `organization ${earn.orgId} has no credit account`);
  const earning = operatorEarning(charge);
  // As postCredit's statement: the promotional part joins, never above what the account holds.
  earner.balance_cents += earning.cents;
  earner.promo_micro = Math.max(
    0,
    Math.min(earner.promo_micro + earning.freeMicro, earner.balance_cents * MICRO_PER_CENT - earner.carry_micro),
  );
  rows.push({
    txType: 'earning',
    description: earn.posting.description,
    ref: earn.posting.ref,
    orgId: earn.orgId,
    amountCents: earning.cents,
    amountMicro: earning.micro,
    freeMicro: earning.freeMicro,
    balanceAfter: earner.balance_cents,
  });
  const repaid = repayDebt(earn.orgId, earner, earn.posting.ref);
  if (repaid) {
    Object.assign(earner, repaid.account);
    rows.push(repaid.row);
  }
  return earning;
}

/** The ledger row of a hold released with nothing charged (`release`, and a batch's zero-cost closing). */
export function releaseRow(
  hold: Pick<HoldRow, 'id' | 'org_id' | 'amount_cents' | 'ref'>,
  balanceAfter: number,
): NewLedgerRow {
  return {
    txType: 'release',
    description: `hold ${hold.id} released: ${hold.amount_cents} cents back to available, nothing charged`,
    orgId: hold.org_id,
    amountCents: 0,
    amountMicro: 0,
    holdCents: -hold.amount_cents,
    balanceAfter,
    ref: hold.ref ?? hold.id,
  };
}

/**
 * A hold charged `usageMicro` against its organization's account as it stands: what the charge
 * is (capped at the hold, the sub-cent carry, the free-tier part), the account's next state and
 * the two ledger rows (the charge, then the hold's release). The one computation of `settle` and
 * of `closeHoldsMany`, so the batch and the one-by-one path cannot drift apart.
 */
export function chargeHold(
  account: Pick<AccountRow, 'balance_cents' | 'held_cents' | 'carry_micro' | 'promo_micro'>,
  hold: Pick<HoldRow, 'id' | 'org_id' | 'amount_cents' | 'ref'>,
  usageMicro: number,
  entry: { txType: string; description: string; ref: string | null | undefined },
) {
  const charged = applyUsage(usageMicro, account.carry_micro, hold.amount_cents);
  const exact = charged.capped ? hold.amount_cents * MICRO_PER_CENT : usageMicro;
  const free = freePart(exact, account.promo_micro);
  const balance = account.balance_cents - charged.cents;
  const next = {
    balance_cents: balance,
    held_cents: account.held_cents - hold.amount_cents,
    carry_micro: charged.carryMicro,
  };
  const ref = entry.ref ?? hold.ref ?? hold.id;
  const released = hold.amount_cents - charged.cents;
  const rows: [NewLedgerRow, NewLedgerRow] = [
    {
      ...entry,
      orgId: hold.org_id,
      amountCents: -charged.cents,
      amountMicro: -exact,
      freeMicro: -free,
      balanceAfter: balance,
      ref,
    },
    {
      txType: 'release',
      description: `hold ${hold.id} closed: ${charged.cents} cents charged, ${released} back to available`,
      orgId: hold.org_id,
      amountCents: 0,
      amountMicro: 0,
      holdCents: -hold.amount_cents,
      balanceAfter: balance,
      ref,
    },
  ];
  return {
    chargedCents: charged.cents,
    exact,
    free,
    released,
    next: { ...next, promo_micro: clampPromo(account.promo_micro - free, next) },
    rows,
  };
}

function at(rows: LedgerRow[], i: number): LedgerRow {
  const row = rows[i];
  if (!row) throw new Error('ledger insert returned too few rows');
  return row;
}

/** Closes the holds, sets the accounts and inserts the ledger rows (in order), in one statement. */
async function writeClosings(
  tx: Queryable,
  holds: HoldRow[],
  accounts: [string, AccountRow][],
  rows: NewLedgerRow[],
): Promise<LedgerRow[]> {
  const closed = holds.filter((h) => h.status !== 'active');
  const { rows: inserted } = await tx.query<LedgerRow & { seq: number }>(
    `WITH h AS (UPDATE credit_holds SET status = v.status, closed_at = now()
                  FROM unnest($1::text[], $2::text[]) AS v(id, status) WHERE credit_holds.id = v.id AND credit_holds.id = ANY($1::text[]) AND credit_holds.status = 'active'),
          a AS (UPDATE credit_accounts SET balance_cents = v.balance, held_cents = v.held, carry_micro = v.carry, promo_micro = v.promo,
                       debt_cents = v.debt, updated_at = now()
                  FROM unnest($3::text[], $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[]) AS v(org_id, balance, held, carry, promo, debt)
                 WHERE credit_accounts.org_id = v.org_id AND credit_accounts.org_id = ANY($3::text[]))
     ${ledgerInsertFrom(9)}`,
    [
      closed.map((h) => h.id),
      closed.map((h) => h.status),
      accounts.map(([orgId]) => orgId),
      accounts.map(([, a]) => a.balance_cents),
      accounts.map(([, a]) => a.held_cents),
      accounts.map(([, a]) => a.carry_micro),
      accounts.map(([, a]) => a.promo_micro),
      accounts.map(([, a]) => a.debt_cents),
      ...ledgerColumns(rows),
    ],
  );
  if (inserted.length !== rows.length) throw new Error('ledger insert returned too few rows');
  return inserted.sort((a, b) => Number(a.seq) - Number(b.seq)).map(({ seq: _seq, ...row }) => row);
}

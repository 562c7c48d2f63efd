import { MICRO_PER_CENT } from '@svc/protocol';
import type { Queryable } from '../../platform/db/index.js';
import { ApiError } from '../../platform/errors.js';
import { applyUsage, availableCents, clampPromo, freePart, MAX_USAGE_MICRO, requireAmount } from './rules.js';
import { postEarning } from './settle-many.js';
import type { EarningPosting } from './service.js';
import {
  ACCOUNT_COLUMNS,
  ledgerColumns,
  ledgerInsertFrom,
  type AccountRow,
  type LedgerRow,
  type NewLedgerRow,
} from './store.js';

/**
 * Charges without a hold (DESIGN.md section 7, revised 2026-11-27): a gateway request's maximum
 * cost is set aside in memory against its instance's credit reservation (billing/reservations.ts),
 * so its ledger rows are only its charge and its operator's earning. The charge draws its cents
 * out of that instance's reservation row first (the cents it set aside), the rest from the
 * balance no instance reserved. Should both together be short (the instance died and its
 * reservation was reclaimed, then spent), the charge is cut to what is there: a balance never
 * goes below zero, and the charge says it was cut.
 *
 * Many at once, with 3 statements whatever their number (a flush of the group-commit writer):
 * every account involved locked in one fixed order, the reservations read, then the reservations,
 * the accounts and the ledger rows written by one statement. Each charge is computed in entry
 * order, seeing the accounts as the ones before left them.
 */

/** One charge of {@link chargeReservedMany}. */
export interface ReservedCharge {
  orgId: string;
  /** The instance whose reservation set the maximum cost aside; null when none did (a request rebuilt from its ticket). */
  instanceId: string | null;
  /** The exact usage, in micro-CAD (> 0). */
  usageMicro: number;
  /** The most it may charge, in cents: the maximum cost set aside (as a hold's amount caps a settle). */
  capCents: number;
  posting: { txType: string; description: string; ref: string | null | undefined };
  /** The operator credited its earning on the charge. */
  earn?: { orgId: string; posting: { description: string; ref: string | null | undefined } };
}

/** What one reserved charge did. */
export interface ReservedOutcome {
  /** Whole cents moved (after the carry; may be 0). */
  charged_cents: number;
  /** The exact charge in micro-CAD (the usage, or the cap when it bit). */
  charged_micro: number;
  /** The part of `charged_micro` paid with free-tier credit. */
  free_micro: number;
  /** Nothing was held, so nothing is released: always 0 (the shape `ledger.charged` evidence reads). */
  released_cents: 0;
  transaction: LedgerRow;
  earning: EarningPosting | null;
  /** Cents taken out of `instanceId`'s reservation row. */
  drawn: number;
  /** True when the credit there could not cover the charge and it was cut to what was. */
  cut: boolean;
}

/** The key of an (organization, instance) reservation in the maps below. */
const keyOf = (orgId: string, instanceId: string) => `${orgId}\u0000${instanceId}`;

/**
 * Writes every charge of `charges` inside `tx` (see the file's comment). Returns one outcome per
 * charge, in order. Throws 404 for an organization without an account, writing nothing.
 */
export async function chargeReservedMany(
  tx: Queryable,
  charges: readonly ReservedCharge[],
): Promise<ReservedOutcome[]> {
  if (charges.length === 0) return [];
  for (const c of charges) {
    requireAmount(c.usageMicro, 'usage_micro', { max: MAX_USAGE_MICRO });
    requireAmount(c.capCents, 'cap_cents');
  }
  const orgIds = [...new Set(charges.flatMap((c) => [c.orgId, ...(c.earn ? [c.earn.orgId] : [])]))];
  // One fixed order (org id) for every account, so two flushes never wait on each other in a cycle.
  const { rows: locked } = await tx.query<AccountRow & { org_id: string }>(
    `SELECT org_id, ${ACCOUNT_COLUMNS} FROM credit_accounts WHERE org_id = ANY($1::text[]) ORDER BY org_id FOR UPDATE`,
    [orgIds],
  );
  const pairs = charges.flatMap((c) => (c.instanceId === null ? [] : [[c.orgId, c.instanceId] as const]));
  // Expired or not: a row still there is still counted in `reserved_cents` (the account is locked,
  // so no reclaim runs meanwhile), and its cents were set aside for exactly these requests.
  const { rows: reservedRows } =
    pairs.length > 0
      ? await tx.query<{ org_id: string; instance_id: string; amount_cents: number }>(
          `SELECT r.org_id, r.instance_id, r.amount_cents FROM credit_reservations r
             JOIN unnest($1::text[], $2::text[]) AS v(org_id, instance_id)
               ON r.org_id = v.org_id AND r.instance_id = v.instance_id`,
          [pairs.map((p) => p[0]), pairs.map((p) => p[1])],
        )
      : { rows: [] };
  const accounts = new Map(locked.map(({ org_id, ...a }) => [org_id, { ...a, reserved_cents: a.reserved_cents ?? 0 }]));
  const reserved = new Map(reservedRows.map((r) => [keyOf(r.org_id, r.instance_id), Number(r.amount_cents)]));
  const drawnBy = new Map<string, { orgId: string; instanceId: string; cents: number }>();
  const rows: NewLedgerRow[] = [];
  const planned = charges.map((c) => {
    const account = accounts.get(c.orgId);
    if (!account) throw new ApiError('not_found', `organization ${c.orgId} has no credit account`);
    const key = c.instanceId === null ? undefined : keyOf(c.orgId, c.instanceId);
    const own = key === undefined ? 0 : (reserved.get(key) ?? 0);
    const room = own + availableCents(account);
    const cap = Math.min(c.capCents, room);
    const posted = applyUsage(c.usageMicro, account.carry_micro, cap);
    const cut = posted.capped && cap < c.capCents;
    const exact = posted.capped ? cap * MICRO_PER_CENT : c.usageMicro;
    const drawn = Math.min(own, posted.cents);
    if (key !== undefined && c.instanceId !== null && drawn > 0) {
      reserved.set(key, own - drawn);
      const before = drawnBy.get(key)?.cents ?? 0;
      drawnBy.set(key, { orgId: c.orgId, instanceId: c.instanceId, cents: before + drawn });
    }
    const free = freePart(exact, account.promo_micro);
    account.balance_cents -= posted.cents;
    account.reserved_cents -= drawn;
    account.carry_micro = posted.carryMicro;
    account.promo_micro = clampPromo(account.promo_micro - free, account);
    const first = rows.length;
    rows.push({
      ...c.posting,
      description: cut ? `${c.posting.description} (cut to the credit left)`.slice(0, 500) : c.posting.description,
      orgId: c.orgId,
      amountCents: -posted.cents,
      amountMicro: -exact,
      freeMicro: -free,
      balanceAfter: account.balance_cents,
    });
    const earning =
      c.earn && postEarning(accounts, c.earn, { micro: exact, freeMicro: free, cents: posted.cents }, rows);
    return { first, cents: posted.cents, exact, free, earning, drawn, cut };
  });
  const written = await writeCharges(tx, [...drawnBy.values()], [...accounts], rows);
  return planned.map((p) => {
    const transaction = written[p.first];
    const earningRow = p.earning ? written[p.first + 1] : undefined;
    if (!transaction || (p.earning && !earningRow)) throw new Error('ledger insert returned too few rows');
    return {
      charged_cents: p.cents,
      charged_micro: p.exact,
      free_micro: p.free,
      released_cents: 0,
      transaction,
      earning: p.earning && earningRow ? { ...p.earning, transaction: earningRow } : null,
      drawn: p.drawn,
      cut: p.cut,
    };
  });
}

/** Sets the reservations and the accounts and inserts the ledger rows (in order), in one statement. */
async function writeCharges(
  tx: Queryable,
  drawn: readonly { orgId: string; instanceId: string; cents: number }[],
  accounts: readonly [string, AccountRow & { reserved_cents: number }][],
  rows: readonly NewLedgerRow[],
): Promise<LedgerRow[]> {
  const drawnOf = new Map<string, number>();
  for (const d of drawn) drawnOf.set(d.orgId, (drawnOf.get(d.orgId) ?? 0) + d.cents);
  const { rows: inserted } = await tx.query<LedgerRow & { seq: number }>(
    `WITH r AS (UPDATE credit_reservations SET amount_cents = credit_reservations.amount_cents - v.drawn, updated_at = now()
                  FROM unnest($1::text[], $2::text[], $3::bigint[]) AS v(org_id, instance_id, drawn)
                 WHERE credit_reservations.org_id = v.org_id AND credit_reservations.instance_id = v.instance_id),
          a AS (UPDATE credit_accounts SET balance_cents = v.balance, carry_micro = v.carry, promo_micro = v.promo, debt_cents = v.debt,
                       reserved_cents = credit_accounts.reserved_cents - v.drawn, updated_at = now()
                  FROM unnest($4::text[], $5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[], $9::bigint[]) AS v(org_id, balance, carry, promo, drawn, debt)
                 WHERE credit_accounts.org_id = v.org_id AND credit_accounts.org_id = ANY($4::text[]))
     ${ledgerInsertFrom(10)}`,
    [
      drawn.map((d) => d.orgId),
      drawn.map((d) => d.instanceId),
      drawn.map((d) => d.cents),
      accounts.map(([orgId]) => orgId),
      accounts.map(([, a]) => a.balance_cents),
      accounts.map(([, a]) => a.carry_micro),
      accounts.map(([, a]) => a.promo_micro),
      accounts.map(([orgId]) => drawnOf.get(orgId) ?? 0),
      accounts.map(([, a]) => a.debt_cents),
      ...ledgerColumns(rows),
    ],
  );
  if (inserted.length !== rows.length) throw new Error('ledger insert returned too few rows');
  return inserted.sort((a, b) => Number(a.seq) - Number(b.seq)).map(({ seq: _seq, ...row }) => row);
}

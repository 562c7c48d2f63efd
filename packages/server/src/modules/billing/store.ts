import { MICRO_PER_CENT } from '@svc/protocol';
import type { Queryable } from '../../platform/db/index.js';
import { ApiError } from '../../platform/errors.js';
import { newId } from '../../platform/ids.js';
import { debtRepayment } from './rules.js';

/** One ledger row as the API returns it (CreditTransaction). */
export interface LedgerRow {
  id: string;
  tx_type: string;
  amount_cents: number;
  /** The exact amount in micro-CAD (negative for charges); `amount_cents` is what moved after the carry. */
  amount_micro: number;
  /** The part of `amount_micro` paid with (charges) or earned from / granted as (credits) promotional credit. */
  free_micro: number;
  /** What the row changed the held amount by: + for a hold, - for its release. */
  hold_cents: number;
  /** What the row changed the debt by: + for a reversal that found too little, - for a `debt_repayment`. */
  debt_cents: number;
  balance_after: number;
  description: string;
  ref: string | null;
  created_at: Date;
}

/** Creates the organization's (empty) credit account. */
export async function openAccount(db: Queryable, orgId: string): Promise<void> {
  await db.query('INSERT INTO credit_accounts (org_id) VALUES ($1) ON CONFLICT (org_id) DO NOTHING', [orgId]);
}

/**
 * Adds `cents` (>= 0) to the balance and writes the ledger row, with its `balance_after`, in the
 * caller's transaction. Its first statement locks the account row (an `UPDATE ... RETURNING`, no
 * separate `SELECT ... FOR UPDATE`); 404 `not_found` when the organization has no account.
 * `freeMicro` is the promotional part (a free-tier grant, an earning from free-tier work): it joins
 * the account's promotional balance. An organization in debt pays it first from the credit: a
 * `debt_repayment` row follows the credit's ({@link repayDebt}).
 */
export async function postCredit(
  db: Queryable,
  entry: {
    orgId: string;
    cents: number;
    amountMicro?: number;
    freeMicro?: number;
    txType: string;
    description: string;
    ref?: string | null;
  },
): Promise<LedgerRow> {
  const { rows } = await db.query<AccountRow>(
    `UPDATE credit_accounts SET balance_cents = balance_cents + $2,
            promo_micro = GREATEST(0, LEAST(promo_micro + $3, (balance_cents + $2) * 10000 - carry_micro)), updated_at = now()
      WHERE org_id = $1 RETURNING ${ACCOUNT_COLUMNS}`,
    [entry.orgId, entry.cents, entry.freeMicro ?? 0],
  );
  const account = rows[0];
  // The update is the lock: no account row, nothing written.
  if (account === undefined) throw new ApiError('not_found', `organization ${entry.orgId} has no credit account`);
  const credit: NewLedgerRow = { ...entry, amountCents: entry.cents, balanceAfter: account.balance_cents };
  const repaid = repayDebt(entry.orgId, account, entry.ref);
  if (!repaid) return insertLedgerRow(db, credit);
  await updateAccount(db, entry.orgId, repaid.account);
  const [row] = await insertLedgerRows(db, [credit, repaid.row]);
  if (!row) throw new Error('ledger insert returned nothing');
  return row;
}

/**
 * What the organization's debt takes of `account` as it stands ({@link debtRepayment}): its next
 * figures and the `debt_repayment` row (`amount_cents` and `debt_cents` both minus the cents
 * repaid; `ref` the credit that paid it), or undefined when there is no debt or nothing free to
 * pay it with. The caller holds the account's lock and writes both.
 */
export function repayDebt<A extends AccountRow>(
  orgId: string,
  account: A,
  ref: string | null | undefined,
): { account: A; row: NewLedgerRow } | undefined {
  const repaid = debtRepayment(account);
  if (repaid.cents === 0) return undefined;
  return {
    account: repaid.account,
    row: {
      orgId,
      txType: 'debt_repayment',
      amountCents: -repaid.cents,
      debtCents: -repaid.cents,
      balanceAfter: repaid.account.balance_cents,
      description: `debt repaid: ${repaid.cents} cents of ${account.debt_cents} owed`,
      ref: ref ?? null,
    },
  };
}

/** One ledger row to write; `amountMicro` defaults to `amountCents * 10000`. */
export interface NewLedgerRow {
  orgId: string;
  amountCents: number;
  amountMicro?: number;
  freeMicro?: number;
  holdCents?: number;
  debtCents?: number;
  balanceAfter: number;
  txType: string;
  description: string;
  ref?: string | null;
}

const LEDGER_COLUMNS =
  'id, tx_type, amount_cents, amount_micro, free_micro, hold_cents, debt_cents, balance_after, description, ref, created_at';

/** The columns a new ledger row is inserted with, in {@link ledgerValues}' order, and their SQL types. */
const LEDGER_INSERT = [
  ['id', 'text'],
  ['org_id', 'text'],
  ['tx_type', 'text'],
  ['amount_cents', 'bigint'],
  ['amount_micro', 'bigint'],
  ['free_micro', 'bigint'],
  ['hold_cents', 'bigint'],
  ['debt_cents', 'bigint'],
  ['balance_after', 'bigint'],
  ['description', 'text'],
  ['ref', 'text'],
] as const;
const LEDGER_INSERT_COLUMNS = LEDGER_INSERT.map(([column]) => column).join(', ');

/**
 * A new ledger row's values in the insert's column order ({@link LEDGER_INSERT}), with a
 * fresh id and the defaults filled in: the one place a `credit_transactions` row is built.
 */
export function ledgerValues(row: NewLedgerRow): unknown[] {
  return [
    newId('tx'),
    row.orgId,
    row.txType,
    row.amountCents,
    row.amountMicro ?? row.amountCents * MICRO_PER_CENT,
    row.freeMicro ?? 0,
    row.holdCents ?? 0,
    row.debtCents ?? 0,
    row.balanceAfter,
    row.description,
    row.ref ?? null,
  ];
}

/**
 * The values of `rows` column by column (one array per column of {@link LEDGER_INSERT}), for a
 * statement that inserts them from {@link ledgerInsertFrom}.
 */
export function ledgerColumns(rows: readonly NewLedgerRow[]): unknown[][] {
  const values = rows.map(ledgerValues);
  return LEDGER_INSERT.map((_, i) => values.map((v) => v[i]));
}

/**
 * `INSERT ... SELECT` of the rows {@link ledgerColumns} laid out as parameters `$first` onwards,
 * in order, returning them with their `seq`: the one statement tail every batch writer ends with.
 */
export function ledgerInsertFrom(first: number): string {
  const arrays = LEDGER_INSERT.map(([, type], i) => `$${first + i}::${type}[]`).join(', ');
  return `INSERT INTO credit_transactions (${LEDGER_INSERT_COLUMNS})
     SELECT ${LEDGER_INSERT_COLUMNS}
       FROM unnest(${arrays}) WITH ORDINALITY AS v(${LEDGER_INSERT_COLUMNS}, n)
      ORDER BY n
     RETURNING seq, ${LEDGER_COLUMNS}`;
}

/** Writes ledger rows in one statement, in order (their `seq` follows it); returns them as written. */
export async function insertLedgerRows(db: Queryable, rows: NewLedgerRow[]): Promise<LedgerRow[]> {
  const width = LEDGER_INSERT.length;
  const values = rows.map((_, i) => `(${LEDGER_INSERT.map((_, j) => `$${i * width + j + 1}`).join(', ')})`);
  const { rows: inserted } = await db.query<LedgerRow & { seq: number }>(
    `INSERT INTO credit_transactions (${LEDGER_INSERT_COLUMNS})
     VALUES ${values.join(', ')} RETURNING seq, ${LEDGER_COLUMNS}`,
    rows.flatMap(ledgerValues),
  );
  if (inserted.length !== rows.length) throw new Error('ledger insert returned too few rows');
  return inserted.sort((a, b) => Number(a.seq) - Number(b.seq)).map(({ seq: _seq, ...row }) => row);
}

export async function insertLedgerRow(db: Queryable, row: NewLedgerRow): Promise<LedgerRow> {
  const [inserted] = await insertLedgerRows(db, [row]);
  if (!inserted) throw new Error('ledger insert returned nothing');
  return inserted;
}

/** The account row the ledger rules work on. */
export interface AccountRow {
  balance_cents: number;
  held_cents: number;
  carry_micro: number;
  /** The promotional part of the balance (free-tier credit), in micro-CAD, spent first. */
  promo_micro: number;
  /** What server instances have reserved of the balance (the sum of the organization's credit_reservations). */
  reserved_cents?: number;
  /** What the organization owes (billing/reversal.ts): not spendable, paid first from its next credits. */
  debt_cents: number;
}

/** The account's columns every locking read takes (the batch writers add `org_id`). */
export const ACCOUNT_COLUMNS = 'balance_cents, held_cents, carry_micro, promo_micro, reserved_cents, debt_cents';

/**
 * The accounts of `orgIds`, each locked until the transaction ends, in one fixed order (org id):
 * two callers locking overlapping sets never wait on each other in a cycle.
 */
export async function lockAccounts(db: Queryable, orgIds: readonly string[]): Promise<Map<string, AccountRow>> {
  const { rows } = await db.query<AccountRow & { org_id: string }>(
    `SELECT org_id, ${ACCOUNT_COLUMNS} FROM credit_accounts WHERE org_id = ANY($1::text[]) ORDER BY org_id FOR UPDATE`,
    [[...new Set(orgIds)]],
  );
  return new Map(rows.map(({ org_id, ...account }) => [org_id, account]));
}

/**
 * Reads the account and locks its row until the transaction ends, so operations on one
 * organization's credits run one after another (PostgreSQL; PGlite runs one transaction at a time).
 */
export async function lockAccount(db: Queryable, orgId: string): Promise<AccountRow | undefined> {
  const { rows } = await db.query<AccountRow>(
    `SELECT ${ACCOUNT_COLUMNS} FROM credit_accounts WHERE org_id = $1 FOR UPDATE`,
    [orgId],
  );
  return rows[0];
}

/**
 * The account, locked, with `own_reserved_cents`: what the live reservation of `instanceId` holds
 * of it (0 without one). The reservation row needs no lock of its own: every write to it locks
 * the account first. It is read by a second statement, after the lock is held: read in the
 * locking statement, PostgreSQL would evaluate it in that statement's snapshot, from before a
 * concurrent hold it waited for committed (only the locked row itself is re-read), and the hold
 * would draw on cents that hold already took.
 */
export async function lockAccountForHold(
  db: Queryable,
  orgId: string,
  instanceId: string | null,
): Promise<(AccountRow & { own_reserved_cents: number }) | undefined> {
  const account = await lockAccount(db, orgId);
  if (!account || instanceId === null) return account && { ...account, own_reserved_cents: 0 };
  const { rows } = await db.query<{ amount_cents: number }>(
    'SELECT amount_cents FROM credit_reservations WHERE org_id = $1 AND instance_id = $2 AND expires_at > now()',
    [orgId, instanceId],
  );
  return { ...account, own_reserved_cents: Number(rows[0]?.amount_cents ?? 0) };
}

/** The account a hold draws on, locked (the hold's organization never changes, so it is read unlocked). */
export async function lockAccountOfHold(db: Queryable, holdId: string): Promise<AccountRow | undefined> {
  const { rows } = await db.query<AccountRow>(
    `SELECT ${ACCOUNT_COLUMNS} FROM credit_accounts WHERE org_id = (SELECT org_id FROM credit_holds WHERE id = $1) FOR UPDATE`,
    [holdId],
  );
  return rows[0];
}

export async function readAccount(db: Queryable, orgId: string): Promise<AccountRow | undefined> {
  const { rows } = await db.query<AccountRow>(`SELECT ${ACCOUNT_COLUMNS} FROM credit_accounts WHERE org_id = $1`, [
    orgId,
  ]);
  return rows[0];
}

/** Sets the account's figures (the caller holds the row lock and computed them). */
export async function updateAccount(db: Queryable, orgId: string, account: AccountRow): Promise<void> {
  await db.query(
    `UPDATE credit_accounts SET balance_cents = $2, held_cents = $3, carry_micro = $4, promo_micro = $5, debt_cents = $6,
            updated_at = now() WHERE org_id = $1`,
    [orgId, account.balance_cents, account.held_cents, account.carry_micro, account.promo_micro, account.debt_cents],
  );
}

export interface HoldRow {
  id: string;
  org_id: string;
  amount_cents: number;
  ref: string | null;
  status: 'active' | 'settled' | 'released';
}

const HOLD_COLUMNS = 'id, org_id, amount_cents, ref, status';

/**
 * Records a new hold, its ledger row (`hold`, 0 cents moved, `hold_cents` +amount) and sets the
 * account's figures (the caller holds the row lock), in one statement. `drawn` cents of it come
 * out of the reservation of `instanceId` (which shrinks by as much, and `reserved_cents` with it).
 */
export async function insertHoldAndSetAccount(
  db: Queryable,
  hold: { id: string; orgId: string; amountCents: number; ref: string | null },
  account: AccountRow,
  reservation: { instanceId: string | null; drawn: number } = { instanceId: null, drawn: 0 },
): Promise<void> {
  await db.query(
    `WITH h AS (INSERT INTO credit_holds (id, org_id, amount_cents, ref) VALUES ($1, $2, $3, $4)),
          t AS (INSERT INTO credit_transactions (id, org_id, tx_type, amount_cents, amount_micro, free_micro, hold_cents, balance_after, description, ref)
                VALUES ($8, $2, 'hold', 0, 0, 0, $3, $5, $9, COALESCE($4, $1))),
          r AS (UPDATE credit_reservations SET amount_cents = amount_cents - $10, updated_at = now()
                 WHERE org_id = $2 AND instance_id = $11 AND $10 > 0)
     UPDATE credit_accounts SET balance_cents = $5, held_cents = $6, carry_micro = $7, reserved_cents = reserved_cents - $10,
            updated_at = now() WHERE org_id = $2`,
    [
      hold.id,
      hold.orgId,
      hold.amountCents,
      hold.ref,
      account.balance_cents,
      account.held_cents,
      account.carry_micro,
      newId('tx'),
      `hold ${hold.id}: ${hold.amountCents} cents reserved`,
      reservation.drawn,
      reservation.instanceId,
    ],
  );
}

/** The hold, locked for update when `lock` is set. */
export async function findHold(db: Queryable, holdId: string, lock = false): Promise<HoldRow | undefined> {
  const { rows } = await db.query<HoldRow>(
    `SELECT ${HOLD_COLUMNS} FROM credit_holds WHERE id = $1${lock ? ' FOR UPDATE' : ''}`,
    [holdId],
  );
  return rows[0];
}

/** Closes an active hold and sets its account's figures (the caller holds both locks), in one statement. */
export async function closeHoldAndSetAccount(
  db: Queryable,
  holdId: string,
  status: 'settled' | 'released',
  orgId: string,
  account: Pick<AccountRow, 'balance_cents' | 'held_cents' | 'carry_micro' | 'promo_micro'>,
): Promise<void> {
  await db.query(
    `WITH h AS (UPDATE credit_holds SET status = $2, closed_at = now() WHERE id = $1 AND status = 'active')
     UPDATE credit_accounts SET balance_cents = $4, held_cents = $5, carry_micro = $6, promo_micro = $7, updated_at = now() WHERE org_id = $3`,
    [holdId, status, orgId, account.balance_cents, account.held_cents, account.carry_micro, account.promo_micro],
  );
}

/** One page of an organization's ledger, newest first. */
export async function listLedger(
  db: Queryable,
  orgId: string,
  page: { limit: number; offset: number },
): Promise<LedgerRow[]> {
  const { rows } = await db.query<LedgerRow>(
    `SELECT ${LEDGER_COLUMNS} FROM credit_transactions WHERE org_id = $1 ORDER BY seq DESC LIMIT $2 OFFSET $3`,
    [orgId, page.limit, page.offset],
  );
  return rows;
}

export async function countLedger(db: Queryable, orgId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    'SELECT count(*)::bigint AS n FROM credit_transactions WHERE org_id = $1',
    [orgId],
  );
  return rows[0]?.n ?? 0;
}

/** The sum of an organization's ledger rows, or of its rows of one `tx_type`. */
export async function sumLedger(db: Queryable, orgId: string, txType?: string): Promise<number> {
  const { rows } = await db.query<{ total: number }>(
    'SELECT COALESCE(sum(amount_cents), 0)::bigint AS total FROM credit_transactions WHERE org_id = $1 AND ($2::text IS NULL OR tx_type = $2)',
    [orgId, txType ?? null],
  );
  return rows[0]?.total ?? 0;
}

/** The sum of an organization's rows' `debt_cents` (should equal the account's `debt_cents`). */
export async function sumDebtRows(db: Queryable, orgId: string): Promise<number> {
  const { rows } = await db.query<{ total: number }>(
    'SELECT COALESCE(sum(debt_cents), 0)::bigint AS total FROM credit_transactions WHERE org_id = $1',
    [orgId],
  );
  return rows[0]?.total ?? 0;
}

/** What the organization's active holds reserve (should equal `held_cents`). */
export async function sumActiveHolds(db: Queryable, orgId: string): Promise<number> {
  const { rows } = await db.query<{ total: number }>(
    "SELECT COALESCE(sum(amount_cents), 0)::bigint AS total FROM credit_holds WHERE org_id = $1 AND status = 'active'",
    [orgId],
  );
  return rows[0]?.total ?? 0;
}

/** Per UTC day since `since`: the charges (as a positive sum) and the credits of the ledger. */
export async function ledgerByDay(
  db: Queryable,
  orgId: string,
  since: Date,
): Promise<{ date: string; spend_cents: number; credit_cents: number }[]> {
  const { rows } = await db.query<{ date: string; spend_cents: number; credit_cents: number }>(
    `SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS date,
            COALESCE(sum(-amount_cents) FILTER (WHERE amount_cents < 0), 0)::bigint AS spend_cents,
            COALESCE(sum(amount_cents) FILTER (WHERE amount_cents > 0), 0)::bigint AS credit_cents
       FROM credit_transactions WHERE org_id = $1 AND created_at >= $2
      GROUP BY 1 ORDER BY 1`,
    [orgId, since],
  );
  return rows;
}

/** The organization's ledger rows that reference `ref` (a job or a gateway request), in order. */
export async function ledgerOfRef(db: Queryable, orgId: string, ref: string): Promise<LedgerRow[]> {
  const { rows } = await db.query<LedgerRow>(
    `SELECT ${LEDGER_COLUMNS} FROM credit_transactions WHERE org_id = $1 AND ref = $2 ORDER BY seq`,
    [orgId, ref],
  );
  return rows;
}

/**
 * Every ledger row that references `ref`, whatever its organization, in order: a gateway
 * request's hold, charge or release (the buyer's) and its earning (the operator's).
 */
export async function ledgerOfRefAllOrgs(db: Queryable, ref: string): Promise<LedgerRow[]> {
  const { rows } = await db.query<LedgerRow>(
    `SELECT ${LEDGER_COLUMNS} FROM credit_transactions WHERE ref = $1 ORDER BY seq`,
    [ref],
  );
  return rows;
}

/**
 * The rows of `ref` a reversal works from, whatever their organization, in order: its charges and
 * earnings, and the reversals already written.
 */
export async function reversibleRowsOf(db: Queryable, ref: string): Promise<(LedgerRow & { org_id: string })[]> {
  const { rows } = await db.query<LedgerRow & { org_id: string }>(
    `SELECT org_id, ${LEDGER_COLUMNS} FROM credit_transactions
      WHERE ref = $1 AND tx_type IN ('charge', 'earning', 'refund', 'earning_reversal') ORDER BY seq`,
    [ref],
  );
  return rows;
}

/**
 * An organization's earning rows summed, less their reversals (exact, and the promotional part),
 * and what was paid out.
 */
export async function earningTotals(
  db: Queryable,
  orgId: string,
): Promise<{ earned_micro: number; free_micro: number; paid_out_cents: number }> {
  const { rows } = await db.query<{ earned_micro: number; free_micro: number; paid_out_cents: number }>(
    `SELECT COALESCE(sum(amount_micro) FILTER (WHERE tx_type IN ('earning', 'earning_reversal')), 0)::bigint AS earned_micro,
            COALESCE(sum(free_micro) FILTER (WHERE tx_type IN ('earning', 'earning_reversal')), 0)::bigint AS free_micro,
            COALESCE(-sum(amount_cents) FILTER (WHERE tx_type IN ('payout', 'payout_reversal')), 0)::bigint AS paid_out_cents
       FROM credit_transactions WHERE org_id = $1`,
    [orgId],
  );
  return rows[0] ?? { earned_micro: 0, free_micro: 0, paid_out_cents: 0 };
}

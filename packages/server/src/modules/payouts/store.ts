import type { Queryable } from '../../platform/db/index.js';

/** SQL for payout accounts, payouts, top-ups and applied provider events (this module owns those tables). */

export interface PayoutAccountRow {
  org_id: string;
  provider: string;
  account_id: string;
  email: string;
  country: string;
  onboarded: boolean;
  created_at: Date;
}

export interface PayoutRow {
  id: string;
  org_id: string;
  account_id: string;
  provider: string;
  amount_cents: number;
  currency: string;
  status: 'pending' | 'paid' | 'failed';
  period_start: Date;
  period_end: Date;
  provider_ref: string | null;
  failure_reason: string | null;
  created_at: Date;
}

export interface TopupRow {
  id: string;
  org_id: string;
  provider: string;
  amount_cents: number;
  currency: string;
  status: 'pending' | 'paid' | 'failed';
  provider_ref: string | null;
  checkout_url: string;
  failure_reason: string | null;
  created_at: Date;
  completed_at: Date | null;
  /** When its credit became paid credit (the provider confirmed it, or an administrator did); null while promotional. */
  confirmed_at: Date | null;
}

const ACCOUNT = 'org_id, provider, account_id, email, country, onboarded, created_at';
const PAYOUT =
  'id, org_id, account_id, provider, amount_cents, currency, status, period_start, period_end, provider_ref, failure_reason, created_at';
const TOPUP =
  'id, org_id, provider, amount_cents, currency, status, provider_ref, checkout_url, failure_reason, created_at, completed_at, confirmed_at';

export async function findAccountOfOrg(db: Queryable, orgId: string): Promise<PayoutAccountRow | undefined> {
  const { rows } = await db.query<PayoutAccountRow>(`SELECT ${ACCOUNT} FROM payout_accounts WHERE org_id = $1`, [
    orgId,
  ]);
  return rows[0];
}

/** Inserts the organization's account unless it has one; returns the one it has either way. */
export async function insertAccount(
  db: Queryable,
  row: Omit<PayoutAccountRow, 'onboarded' | 'created_at'>,
): Promise<{ account: PayoutAccountRow; created: boolean }> {
  const { rows } = await db.query<PayoutAccountRow>(
    `INSERT INTO payout_accounts (org_id, provider, account_id, email, country) VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (org_id) DO NOTHING RETURNING ${ACCOUNT}`,
    [row.org_id, row.provider, row.account_id, row.email, row.country],
  );
  if (rows[0]) return { account: rows[0], created: true };
  const existing = await findAccountOfOrg(db, row.org_id);
  if (!existing) throw new Error(`payout account of ${row.org_id} vanished`);
  return { account: existing, created: false };
}

/** Sets the onboarding state of a provider's account; returns the organization it belongs to, if any. */
export async function setOnboarded(
  db: Queryable,
  provider: string,
  accountId: string,
  onboarded: boolean,
): Promise<string | undefined> {
  const { rows } = await db.query<{ org_id: string }>(
    'UPDATE payout_accounts SET onboarded = $3, updated_at = now() WHERE provider = $1 AND account_id = $2 RETURNING org_id',
    [provider, accountId, onboarded],
  );
  return rows[0]?.org_id;
}

export async function onboardedAccounts(db: Queryable, provider: string): Promise<PayoutAccountRow[]> {
  const { rows } = await db.query<PayoutAccountRow>(
    `SELECT ${ACCOUNT} FROM payout_accounts WHERE onboarded AND provider = $1 ORDER BY org_id`,
    [provider],
  );
  return rows;
}

/** Records a provider event; false when it was applied before (a replay). */
export async function recordEvent(
  db: Queryable,
  provider: string,
  eventId: string,
  eventType: string,
): Promise<boolean> {
  const { rows } = await db.query(
    'INSERT INTO payment_events (provider, event_id, event_type) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING event_id',
    [provider, eventId, eventType],
  );
  return rows.length === 1;
}

// --- Top-ups ---

export async function insertTopup(
  db: Queryable,
  row: { id: string; orgId: string; provider: string; amountCents: number; currency: string; createdBy: string },
): Promise<void> {
  await db.query(
    "INSERT INTO topups (id, org_id, provider, amount_cents, currency, status, created_by) VALUES ($1, $2, $3, $4, $5, 'pending', $6)",
    [row.id, row.orgId, row.provider, row.amountCents, row.currency, row.createdBy],
  );
}

export async function setTopupCheckout(
  db: Queryable,
  id: string,
  sessionId: string,
  url: string,
): Promise<TopupRow | undefined> {
  const { rows } = await db.query<TopupRow>(
    `UPDATE topups SET provider_ref = $2, checkout_url = $3 WHERE id = $1 RETURNING ${TOPUP}`,
    [id, sessionId, url],
  );
  return rows[0];
}

/** The top-up, of `orgId` when given (another organization's is undefined), locked when `lock` is set. */
export async function findTopup(
  db: Queryable,
  id: string,
  options: { orgId?: string; lock?: boolean } = {},
): Promise<TopupRow | undefined> {
  const { rows } = await db.query<TopupRow>(
    `SELECT ${TOPUP} FROM topups WHERE id = $1 AND ($2::text IS NULL OR org_id = $2)${options.lock ? ' FOR UPDATE' : ''}`,
    [id, options.orgId ?? null],
  );
  return rows[0];
}

export async function listTopups(
  db: Queryable,
  orgId: string,
  page: { limit: number; offset: number },
): Promise<{ rows: TopupRow[]; total: number }> {
  const [list, count] = await Promise.all([
    db.query<TopupRow>(
      `SELECT ${TOPUP} FROM topups WHERE org_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2 OFFSET $3`,
      [orgId, page.limit, page.offset],
    ),
    db.query<{ n: number }>('SELECT count(*)::bigint AS n FROM topups WHERE org_id = $1', [orgId]),
  ]);
  return { rows: list.rows, total: Number(count.rows[0]?.n ?? 0) };
}

/**
 * Moves a pending top-up to `paid` (`confirmed`: its credit is paid credit at once) or `failed`;
 * undefined when it was not pending (already applied).
 */
export async function closeTopup(
  db: Queryable,
  id: string,
  outcome: { status: 'paid'; confirmed: boolean } | { status: 'failed'; reason: string },
): Promise<TopupRow | undefined> {
  const reason = outcome.status === 'failed' ? outcome.reason : null;
  const confirmed = outcome.status === 'paid' && outcome.confirmed;
  const { rows } = await db.query<TopupRow>(
    `UPDATE topups SET status = $2, failure_reason = $3, completed_at = now(), confirmed_at = CASE WHEN $4 THEN now() END
      WHERE id = $1 AND status = 'pending' RETURNING ${TOPUP}`,
    [id, outcome.status, reason, confirmed],
  );
  return rows[0];
}

/** Marks a paid, unconfirmed top-up confirmed, once; undefined for any other (unknown, pending, failed, confirmed). */
export async function confirmTopupRow(db: Queryable, id: string): Promise<TopupRow | undefined> {
  const { rows } = await db.query<TopupRow>(
    `UPDATE topups SET confirmed_at = now() WHERE id = $1 AND status = 'paid' AND confirmed_at IS NULL RETURNING ${TOPUP}`,
    [id],
  );
  return rows[0];
}

// --- Payouts ---

export async function insertPayout(
  db: Queryable,
  row: Omit<PayoutRow, 'status' | 'provider_ref' | 'failure_reason' | 'created_at'>,
): Promise<PayoutRow> {
  const { rows } = await db.query<PayoutRow>(
    `INSERT INTO payouts (id, org_id, account_id, provider, amount_cents, currency, status, period_start, period_end)
     VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7, $8) RETURNING ${PAYOUT}`,
    [
      row.id,
      row.org_id,
      row.account_id,
      row.provider,
      row.amount_cents,
      row.currency,
      row.period_start,
      row.period_end,
    ],
  );
  const inserted = rows[0];
  if (!inserted) throw new Error('payout insert returned nothing');
  return inserted;
}

export async function findPayout(db: Queryable, id: string): Promise<PayoutRow | undefined> {
  const { rows } = await db.query<PayoutRow>(`SELECT ${PAYOUT} FROM payouts WHERE id = $1`, [id]);
  return rows[0];
}

/** Records the provider's reference of a pending payout and, when `paid`, closes it. */
export async function setPayoutSent(
  db: Queryable,
  id: string,
  ref: string,
  paid: boolean,
): Promise<PayoutRow | undefined> {
  const { rows } = await db.query<PayoutRow>(
    `UPDATE payouts SET provider_ref = $2, status = CASE WHEN $3 THEN 'paid' ELSE status END, updated_at = now()
      WHERE id = $1 AND status = 'pending' RETURNING ${PAYOUT}`,
    [id, ref, paid],
  );
  return rows[0];
}

/** Moves a pending payout to `failed` with its reason; undefined when it was not pending. */
export async function failPayout(db: Queryable, id: string, reason: string): Promise<PayoutRow | undefined> {
  const { rows } = await db.query<PayoutRow>(
    `UPDATE payouts SET status = 'failed', failure_reason = $2, updated_at = now() WHERE id = $1 AND status = 'pending' RETURNING ${PAYOUT}`,
    [id, reason],
  );
  return rows[0];
}

/** Pending payouts whose transfer was never confirmed sent (a crash or an unanswered call), oldest first. */
export async function unsentPayouts(db: Queryable, provider: string): Promise<PayoutRow[]> {
  const { rows } = await db.query<PayoutRow>(
    `SELECT ${PAYOUT} FROM payouts WHERE status = 'pending' AND provider_ref IS NULL AND provider = $1 ORDER BY created_at, id`,
    [provider],
  );
  return rows;
}

export async function listPayouts(
  db: Queryable,
  orgId: string,
  page: { limit: number; offset: number },
): Promise<{ rows: PayoutRow[]; total: number }> {
  const [list, count] = await Promise.all([
    db.query<PayoutRow>(
      `SELECT ${PAYOUT} FROM payouts WHERE org_id = $1 ORDER BY created_at DESC, id DESC LIMIT $2 OFFSET $3`,
      [orgId, page.limit, page.offset],
    ),
    db.query<{ n: number }>('SELECT count(*)::bigint AS n FROM payouts WHERE org_id = $1', [orgId]),
  ]);
  return { rows: list.rows, total: Number(count.rows[0]?.n ?? 0) };
}

/** Where the next payout's period starts: the last payout's end, else the first earning, else now. */
export async function nextPeriodStart(db: Queryable, orgId: string, now: Date): Promise<Date> {
  const { rows } = await db.query<{ start: Date | null }>(
    `SELECT COALESCE((SELECT max(period_end) FROM payouts WHERE org_id = $1 AND status <> 'failed'),
                     (SELECT min(created_at) FROM credit_transactions WHERE org_id = $1 AND tx_type = 'earning')) AS start`,
    [orgId],
  );
  return rows[0]?.start ?? now;
}

/** Serialises payout decisions for one organization across instances, until the transaction ends. */
export async function lockOrgPayouts(db: Queryable, orgId: string): Promise<void> {
  await db.query('SELECT pg_advisory_xact_lock(5318010, hashtext($1))', [orgId]);
}

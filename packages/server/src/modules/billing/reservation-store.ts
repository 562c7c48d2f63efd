import type { Queryable } from '../../platform/db/index.js';

/**
 * SQL of credit reservations (migration 0090). Every write locks the organization's account row
 * first (the caller does, through `lockAccount`), in the order every ledger operation locks, and
 * keeps `credit_accounts.reserved_cents` equal to the sum of the organization's rows.
 */

/** Deletes the organization's expired reservations (any instance's) and takes them off `reserved_cents`; returns the cents freed. */
export async function reclaimExpired(db: Queryable, orgId: string): Promise<number> {
  const { rows } = await db.query<{ freed: number }>(
    `WITH d AS (DELETE FROM credit_reservations WHERE org_id = $1 AND expires_at <= now() RETURNING amount_cents),
          s AS (SELECT COALESCE(sum(amount_cents), 0)::bigint AS freed FROM d),
          u AS (UPDATE credit_accounts SET reserved_cents = reserved_cents - s.freed, updated_at = now()
                  FROM s WHERE org_id = $1 AND s.freed > 0)
     SELECT freed FROM s`,
    [orgId],
  );
  return Number(rows[0]?.freed ?? 0);
}

/**
 * Adds `cents` to the instance's reservation of the organization (creating it) and sets its
 * expiry `ttlMs` from now; returns the reservation's amount after.
 */
export async function growReservation(
  db: Queryable,
  r: { orgId: string; instanceId: string; cents: number; ttlMs: number },
): Promise<number> {
  const { rows } = await db.query<{ amount_cents: number }>(
    `WITH u AS (UPDATE credit_accounts SET reserved_cents = reserved_cents + $3, updated_at = now() WHERE org_id = $1)
     INSERT INTO credit_reservations (org_id, instance_id, amount_cents, expires_at)
     VALUES ($1, $2, $3, now() + make_interval(secs => $4::double precision / 1000))
     ON CONFLICT (org_id, instance_id) DO UPDATE
       SET amount_cents = credit_reservations.amount_cents + EXCLUDED.amount_cents,
           expires_at = EXCLUDED.expires_at, updated_at = now()
     RETURNING amount_cents`,
    [r.orgId, r.instanceId, r.cents, r.ttlMs],
  );
  return Number(rows[0]?.amount_cents ?? 0);
}

/** Deletes the instance's reservation of the organization and gives its cents back to the available balance; returns them. */
export async function returnReservation(db: Queryable, orgId: string, instanceId: string): Promise<number> {
  const { rows } = await db.query<{ returned: number }>(
    `WITH d AS (DELETE FROM credit_reservations WHERE org_id = $1 AND instance_id = $2 RETURNING amount_cents),
          s AS (SELECT COALESCE(sum(amount_cents), 0)::bigint AS returned FROM d),
          u AS (UPDATE credit_accounts SET reserved_cents = reserved_cents - s.returned, updated_at = now()
                  FROM s WHERE org_id = $1 AND s.returned > 0)
     SELECT returned FROM s`,
    [orgId, instanceId],
  );
  return Number(rows[0]?.returned ?? 0);
}

/**
 * Takes at most `cents` off the instance's reservation of the organization and gives them back to
 * the available balance (a give-back asked by another instance); deletes the row once it is empty.
 * Returns the cents given back.
 */
export async function shrinkReservation(
  db: Queryable,
  r: { orgId: string; instanceId: string; cents: number },
): Promise<number> {
  const { rows } = await db.query<{ returned: number }>(
    `WITH c AS (SELECT LEAST(amount_cents, $3) AS cut FROM credit_reservations WHERE org_id = $1 AND instance_id = $2),
          r AS (UPDATE credit_reservations SET amount_cents = amount_cents - c.cut, updated_at = now()
                  FROM c WHERE org_id = $1 AND instance_id = $2),
          u AS (UPDATE credit_accounts SET reserved_cents = reserved_cents - c.cut, updated_at = now()
                  FROM c WHERE org_id = $1 AND c.cut > 0)
     SELECT cut AS returned FROM c`,
    [r.orgId, r.instanceId, r.cents],
  );
  const returned = Number(rows[0]?.returned ?? 0);
  // An emptied row would still name this instance as a holder to be asked: it goes.
  await db.query('DELETE FROM credit_reservations WHERE org_id = $1 AND instance_id = $2 AND amount_cents = 0', [
    r.orgId,
    r.instanceId,
  ]);
  return returned;
}

/** Other instances' live reservations of the organization (who may be asked to give back), by instance. */
export async function otherReservations(
  db: Queryable,
  orgId: string,
  instanceId: string,
): Promise<{ instanceId: string; cents: number }[]> {
  const { rows } = await db.query<{ instance_id: string; amount_cents: number }>(
    'SELECT instance_id, amount_cents FROM credit_reservations WHERE org_id = $1 AND instance_id <> $2 AND expires_at > now()',
    [orgId, instanceId],
  );
  return rows.map((row) => ({ instanceId: row.instance_id, cents: Number(row.amount_cents) }));
}

/**
 * Extends the instance's live reservations of `orgIds` by `ttlMs` from now (no account lock: only
 * the expiry changes). Returns the amount of each one still there; an organization missing from
 * the answer lost its reservation (it expired and was reclaimed).
 */
export async function renewReservations(
  db: Queryable,
  instanceId: string,
  orgIds: string[],
  ttlMs: number,
): Promise<Map<string, number>> {
  if (orgIds.length === 0) return new Map();
  const { rows } = await db.query<{ org_id: string; amount_cents: number }>(
    `UPDATE credit_reservations SET expires_at = now() + make_interval(secs => $3::double precision / 1000), updated_at = now()
      WHERE instance_id = $1 AND org_id = ANY($2::text[]) AND expires_at > now()
      RETURNING org_id, amount_cents`,
    [instanceId, orgIds, ttlMs],
  );
  return new Map(rows.map((r) => [r.org_id, Number(r.amount_cents)]));
}

/** Organizations with an expired reservation (any instance's), for the sweep. */
export async function orgsWithExpiredReservations(db: Queryable, limit: number): Promise<string[]> {
  const { rows } = await db.query<{ org_id: string }>(
    'SELECT DISTINCT org_id FROM credit_reservations WHERE expires_at <= now() LIMIT $1',
    [limit],
  );
  return rows.map((r) => r.org_id);
}

/** The organizations this instance holds a reservation of (its rows, expired or not). */
export async function reservationsOf(db: Queryable, instanceId: string): Promise<string[]> {
  const { rows } = await db.query<{ org_id: string }>('SELECT org_id FROM credit_reservations WHERE instance_id = $1', [
    instanceId,
  ]);
  return rows.map((r) => r.org_id);
}

/** The instance's reservation of the organization (expired or not), in cents; 0 when it has none. */
export async function reservationAmount(db: Queryable, orgId: string, instanceId: string): Promise<number> {
  const { rows } = await db.query<{ amount_cents: number }>(
    'SELECT amount_cents FROM credit_reservations WHERE org_id = $1 AND instance_id = $2',
    [orgId, instanceId],
  );
  return Number(rows[0]?.amount_cents ?? 0);
}

/** One organization's reservations and their sum against the account's figure (audits, tests). */
export async function sumReservations(db: Queryable, orgId: string): Promise<number> {
  const { rows } = await db.query<{ total: number }>(
    'SELECT COALESCE(sum(amount_cents), 0)::bigint AS total FROM credit_reservations WHERE org_id = $1',
    [orgId],
  );
  return Number(rows[0]?.total ?? 0);
}

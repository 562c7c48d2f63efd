import type { Queryable } from '../../platform/db/index.js';
import type { Role } from '../../platform/principal.js';
import { keyForAuth } from '../keys/store.js';

// The accounts: every statement on buyers, organizations, memberships and sessions (this module
// owns them, README.md). Organizations' member management calls the member functions here.

export interface BuyerRow {
  id: string;
  email: string;
  name: string;
  password_hash: string;
  default_org_id: string;
  created_at: Date;
}

export interface OrgRow {
  id: string;
  name: string;
  created_at: Date;
}

export async function insertOrganization(db: Queryable, org: { id: string; name: string }): Promise<OrgRow> {
  const { rows } = await db.query<OrgRow>(
    'INSERT INTO organizations (id, name) VALUES ($1, $2) RETURNING id, name, created_at',
    [org.id, org.name],
  );
  return one(rows);
}

/** Inserts the buyer, or returns undefined when the email is taken (the unique index decides). */
export async function insertBuyer(
  db: Queryable,
  buyer: { id: string; email: string; name: string; passwordHash: string; defaultOrgId: string },
): Promise<BuyerRow | undefined> {
  const { rows } = await db.query<BuyerRow>(
    `INSERT INTO buyers (id, email, name, password_hash, default_org_id) VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (email) DO NOTHING RETURNING *`,
    [buyer.id, buyer.email, buyer.name, buyer.passwordHash, buyer.defaultOrgId],
  );
  return rows[0];
}

export async function insertMembership(
  db: Queryable,
  m: { orgId: string; buyerId: string; role: Role },
): Promise<void> {
  await db.query('INSERT INTO memberships (org_id, buyer_id, role) VALUES ($1, $2, $3)', [m.orgId, m.buyerId, m.role]);
}

export async function findBuyerByEmail(db: Queryable, email: string): Promise<BuyerRow | undefined> {
  const { rows } = await db.query<BuyerRow>('SELECT * FROM buyers WHERE email = $1', [email]);
  return rows[0];
}

export async function findBuyer(db: Queryable, buyerId: string): Promise<BuyerRow | undefined> {
  const { rows } = await db.query<BuyerRow>('SELECT * FROM buyers WHERE id = $1', [buyerId]);
  return rows[0];
}

export async function setDefaultOrg(db: Queryable, buyerId: string, orgId: string): Promise<void> {
  await db.query('UPDATE buyers SET default_org_id = $2 WHERE id = $1', [buyerId, orgId]);
}

export async function findOrganization(db: Queryable, orgId: string): Promise<OrgRow | undefined> {
  const { rows } = await db.query<OrgRow>('SELECT id, name, created_at FROM organizations WHERE id = $1', [orgId]);
  return rows[0];
}

export async function findRole(db: Queryable, orgId: string, buyerId: string): Promise<Role | undefined> {
  const { rows } = await db.query<{ role: Role }>('SELECT role FROM memberships WHERE org_id = $1 AND buyer_id = $2', [
    orgId,
    buyerId,
  ]);
  return rows[0]?.role;
}

export async function insertSession(
  db: Queryable,
  s: { id: string; buyerId: string; orgId: string; expiresAt: Date },
): Promise<void> {
  await db.query('INSERT INTO sessions (id, buyer_id, org_id, expires_at) VALUES ($1, $2, $3, $4)', [
    s.id,
    s.buyerId,
    s.orgId,
    s.expiresAt,
  ]);
}

/** A live session (not revoked, not expired) with its holder's current role, or undefined. */
export async function findLiveSession(
  db: Queryable,
  sessionId: string,
): Promise<{ buyer_id: string; org_id: string; role: Role } | undefined> {
  const { rows } = await db.query<{ buyer_id: string; org_id: string; role: Role }>(
    `SELECT s.buyer_id, s.org_id, m.role FROM sessions s
       JOIN memberships m ON m.org_id = s.org_id AND m.buyer_id = s.buyer_id
      WHERE s.id = $1 AND s.revoked_at IS NULL AND s.expires_at > now()`,
    [sessionId],
  );
  return rows[0];
}

export async function revokeSession(db: Queryable, sessionId: string): Promise<void> {
  await db.query('UPDATE sessions SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL', [sessionId]);
}

export interface KeyAuthRow {
  id: string;
  org_id: string;
  buyer_id: string;
  hash: string;
  scopes: string[];
  revoked_at: Date | null;
  role: Role | null;
}

/**
 * The key with its creator's current role (null when the creator left the organization): keys'
 * statement for the key, joined here to `memberships`, in one statement (the key cache's read).
 */
export async function findKeyForAuth(db: Queryable, keyId: string): Promise<KeyAuthRow | undefined> {
  const { rows } = await db.query<KeyAuthRow>(
    `SELECT k.id, k.org_id, k.buyer_id, k.hash, k.scopes, k.revoked_at, m.role
       FROM (${keyForAuth('$1')}) k LEFT JOIN memberships m ON m.org_id = k.org_id AND m.buyer_id = k.buyer_id`,
    [keyId],
  );
  return rows[0];
}

export interface MemberRow {
  buyer_id: string;
  email: string;
  name: string;
  role: Role;
  created_at: Date;
}

const MEMBER_COLUMNS = 'b.id AS buyer_id, b.email, b.name, m.role, m.created_at';

export async function listMembers(db: Queryable, orgId: string): Promise<MemberRow[]> {
  const { rows } = await db.query<MemberRow>(
    `SELECT ${MEMBER_COLUMNS} FROM memberships m JOIN buyers b ON b.id = m.buyer_id WHERE m.org_id = $1 ORDER BY m.created_at, b.id`,
    [orgId],
  );
  return rows;
}

/** The member, locked for update when inside a transaction. */
export async function findMember(
  db: Queryable,
  orgId: string,
  buyerId: string,
  forUpdate = false,
): Promise<MemberRow | undefined> {
  const { rows } = await db.query<MemberRow>(
    `SELECT ${MEMBER_COLUMNS} FROM memberships m JOIN buyers b ON b.id = m.buyer_id
      WHERE m.org_id = $1 AND m.buyer_id = $2 ${forUpdate ? 'FOR UPDATE OF m' : ''}`,
    [orgId, buyerId],
  );
  return rows[0];
}

/** Locks the organization's owner rows and counts them, so two demotions cannot race past the last owner. */
export async function lockOwners(db: Queryable, orgId: string): Promise<number> {
  const { rows } = await db.query<{ buyer_id: string }>(
    `SELECT buyer_id FROM memberships WHERE org_id = $1 AND role = 'owner' FOR UPDATE`,
    [orgId],
  );
  return rows.length;
}

export async function setRole(db: Queryable, orgId: string, buyerId: string, role: Role): Promise<void> {
  await db.query('UPDATE memberships SET role = $3 WHERE org_id = $1 AND buyer_id = $2', [orgId, buyerId, role]);
}

/** Ends the membership and the member's sessions in the organization; their default moves to another of theirs. */
export async function deleteMember(db: Queryable, orgId: string, buyerId: string): Promise<void> {
  await db.query('DELETE FROM memberships WHERE org_id = $1 AND buyer_id = $2', [orgId, buyerId]);
  await db.query('UPDATE sessions SET revoked_at = now() WHERE org_id = $1 AND buyer_id = $2 AND revoked_at IS NULL', [
    orgId,
    buyerId,
  ]);
  // Their next login lands in another organization of theirs, if they have one.
  await db.query(
    `UPDATE buyers SET default_org_id = COALESCE((SELECT org_id FROM memberships WHERE buyer_id = $2 ORDER BY created_at LIMIT 1), default_org_id)
      WHERE id = $2 AND default_org_id = $1`,
    [orgId, buyerId],
  );
}

function one<T>(rows: T[]): T {
  const row = rows[0];
  if (!row) throw new Error('expected one row');
  return row;
}

import type { Queryable } from '../../platform/db/index.js';
import type { Role } from '../../platform/principal.js';

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

export interface InviteRow {
  id: string;
  org_id: string;
  email: string;
  role: 'admin' | 'member';
  expires_at: Date;
  accepted_at: Date | null;
}

export async function insertInvite(
  db: Queryable,
  invite: {
    id: string;
    orgId: string;
    email: string;
    role: 'admin' | 'member';
    tokenHash: string;
    invitedBy: string;
    expiresAt: Date;
  },
): Promise<void> {
  await db.query(
    'INSERT INTO invites (id, org_id, email, role, token_hash, invited_by, expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7)',
    [invite.id, invite.orgId, invite.email, invite.role, invite.tokenHash, invite.invitedBy, invite.expiresAt],
  );
}

/** Marks the invite used and returns it, only if it was unused and unexpired (single use, atomically). */
export async function consumeInvite(db: Queryable, tokenHash: string): Promise<InviteRow | undefined> {
  const { rows } = await db.query<InviteRow>(
    `UPDATE invites SET accepted_at = now()
      WHERE token_hash = $1 AND accepted_at IS NULL AND expires_at > now()
      RETURNING id, org_id, email, role, expires_at, accepted_at`,
    [tokenHash],
  );
  return rows[0];
}

import type { Queryable } from '../../platform/db/index.js';

// Every statement on invites (this module owns it, README.md); members are auth's (auth/store.ts).

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

/** The email an invite was sent to, used or not (undefined for an unknown token). */
export async function findInviteEmail(db: Queryable, tokenHash: string): Promise<string | undefined> {
  const { rows } = await db.query<{ email: string }>('SELECT email FROM invites WHERE token_hash = $1', [tokenHash]);
  return rows[0]?.email;
}

import type { Queryable } from '../../platform/db/index.js';

/** Owner of `attestation_challenges` and `node_attestations` (migration 0040). */
export async function insertChallenge(
  db: Queryable,
  c: { challenge: string; nodeId: string; expiresAt: Date },
): Promise<void> {
  await db.query('INSERT INTO attestation_challenges (challenge, node_id, expires_at) VALUES ($1, $2, $3)', [
    c.challenge,
    c.nodeId,
    c.expiresAt,
  ]);
}

/** Marks the challenge used, once: true only for this node's unused, unexpired challenge. */
export async function consumeChallenge(db: Queryable, challenge: string, nodeId: string): Promise<boolean> {
  const { rowCount } = await db.query(
    'UPDATE attestation_challenges SET used_at = now() WHERE challenge = $1 AND node_id = $2 AND used_at IS NULL AND expires_at > now()',
    [challenge, nodeId],
  );
  return rowCount === 1;
}

export async function forgetOldChallenges(db: Queryable): Promise<void> {
  await db.query("DELETE FROM attestation_challenges WHERE expires_at < now() - interval '1 hour'");
}

export interface AttestationRow {
  node_id: string;
  method: number;
  verified: boolean;
  measurement: string | null;
  tcb_status: string | null;
  checks: Array<{ name: string; ok: boolean; detail: string }>;
  verified_at: Date | null;
  expires_at: Date | null;
  attested_at: Date;
}

export async function saveAttestation(db: Queryable, a: Omit<AttestationRow, 'attested_at'>): Promise<void> {
  await db.query(
    `INSERT INTO node_attestations (node_id, method, verified, measurement, tcb_status, checks, verified_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
     ON CONFLICT (node_id) DO UPDATE SET method = EXCLUDED.method, verified = EXCLUDED.verified, measurement = EXCLUDED.measurement,
       tcb_status = EXCLUDED.tcb_status, checks = EXCLUDED.checks, verified_at = EXCLUDED.verified_at, expires_at = EXCLUDED.expires_at, attested_at = now()`,
    [
      a.node_id,
      a.method,
      a.verified,
      a.measurement,
      a.tcb_status,
      JSON.stringify(a.checks),
      a.verified_at,
      a.expires_at,
    ],
  );
}

export async function findAttestation(db: Queryable, nodeId: string): Promise<AttestationRow | undefined> {
  const { rows } = await db.query<AttestationRow>('SELECT * FROM node_attestations WHERE node_id = $1', [nodeId]);
  return rows[0];
}

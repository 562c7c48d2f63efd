import type { Queryable } from '../../platform/db/index.js';

/** An API key as listings show it (APIKeyRecord): never the secret, never the hash. */
export interface KeyRecordRow {
  key_id: string;
  prefix: string;
  hash_alg: string;
  label: string;
  buyer_id: string;
  scopes: string[];
  created_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
  revoked_reason: string | null;
}

const RECORD_COLUMNS = `id AS key_id, prefix, hash_alg, label, buyer_id, scopes, created_at, last_used_at, revoked_at, revoked_reason`;

export async function insertKey(
  db: Queryable,
  key: {
    keyId: string;
    orgId: string;
    buyerId: string;
    prefix: string;
    hash: string;
    hashAlg: string;
    label: string;
    scopes: string[];
  },
): Promise<KeyRecordRow> {
  const { rows } = await db.query<KeyRecordRow>(
    `INSERT INTO api_keys (id, org_id, buyer_id, prefix, hash, hash_alg, label, scopes)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING ${RECORD_COLUMNS}`,
    [key.keyId, key.orgId, key.buyerId, key.prefix, key.hash, key.hashAlg, key.label, key.scopes],
  );
  const row = rows[0];
  if (!row) throw new Error('key insert returned nothing');
  return row;
}

/** Keys of an organization, newest first; only one buyer's when `buyerId` is given. */
export async function listKeys(db: Queryable, orgId: string, buyerId?: string): Promise<KeyRecordRow[]> {
  const { rows } = await db.query<KeyRecordRow>(
    `SELECT ${RECORD_COLUMNS} FROM api_keys WHERE org_id = $1 AND ($2::text IS NULL OR buyer_id = $2) ORDER BY created_at DESC, id DESC`,
    [orgId, buyerId ?? null],
  );
  return rows;
}

export async function findKey(db: Queryable, orgId: string, keyId: string): Promise<KeyRecordRow | undefined> {
  const { rows } = await db.query<KeyRecordRow>(
    `SELECT ${RECORD_COLUMNS} FROM api_keys WHERE org_id = $1 AND id = $2`,
    [orgId, keyId],
  );
  return rows[0];
}

/** Revokes the key if it is not already; returns the record, or undefined if it was already revoked. */
export async function revokeKey(
  db: Queryable,
  orgId: string,
  keyId: string,
  reason: string,
): Promise<KeyRecordRow | undefined> {
  const { rows } = await db.query<KeyRecordRow>(
    `UPDATE api_keys SET revoked_at = now(), revoked_reason = $3
      WHERE org_id = $1 AND id = $2 AND revoked_at IS NULL RETURNING ${RECORD_COLUMNS}`,
    [orgId, keyId, reason],
  );
  return rows[0];
}

/** Revokes every live key a buyer created in an organization (when they leave it). */
export async function revokeKeysOf(db: Queryable, orgId: string, buyerId: string, reason: string): Promise<number> {
  const { rowCount } = await db.query(
    'UPDATE api_keys SET revoked_at = now(), revoked_reason = $3 WHERE org_id = $1 AND buyer_id = $2 AND revoked_at IS NULL',
    [orgId, buyerId, reason],
  );
  return rowCount;
}

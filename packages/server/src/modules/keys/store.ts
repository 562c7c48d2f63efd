import type { Queryable } from '../../platform/db/index.js';

// Every statement on api_keys (this module owns it, README.md). Authentication's read joins the
// creator's role in auth's store, around `keyForAuth`.

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

/**
 * The statement selecting key `param` (a placeholder such as `$1`) as authentication reads it:
 * auth's store joins its creator's role onto it (`findKeyForAuth`), so the key cache reads both
 * in one statement while `api_keys` stays written and read here only.
 *
 * @example
 * `SELECT k.*, m.role FROM (${keyForAuth('$1')}) k LEFT JOIN ...` (auth/store.ts)
 */
export function keyForAuth(param: string): string {
  return `SELECT id, org_id, buyer_id, hash, scopes, revoked_at FROM api_keys WHERE id = ${param}`;
}

/** Records use, at most every 10 seconds per key, so a busy key costs no write per request. */
export async function touchKey(db: Queryable, keyId: string): Promise<void> {
  await db.query(
    `UPDATE api_keys SET last_used_at = now()
      WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < now() - interval '10 seconds')`,
    [keyId],
  );
}

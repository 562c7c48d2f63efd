import { randomBytes, createHash, type KeyObject } from 'node:crypto';
import { generateEd25519, privateKeyFromSeedHex, publicKeyHex, seedHex } from '@svc/protocol';
import type { Config } from './config.js';
import type { Db, Queryable } from './db/index.js';

/** A platform signing key as published at `GET /api/v1/keys/platform`. */
export interface PlatformKey {
  key_id: string;
  public_key_hex: string;
  valid_from: Date;
  valid_until: Date | null;
}

/** The active signer plus every key ever used, so old signatures stay verifiable. */
export interface PlatformSecrets {
  /** The current signer; replaced by {@link PlatformSecrets.reload} after a rotation. */
  active: PlatformKey & { privateKey: KeyObject };
  /** HMAC pepper for API-key hashes. Never logged, never returned. */
  pepper: Buffer;
  /** HMAC key for session tokens (HS256). */
  sessionSecret: Buffer;
  listKeys(): Promise<PlatformKey[]>;
  /** Re-reads the active key (another process rotated it: `svc keys rotate`); `within` an open transaction when called from one. */
  reload(within?: Queryable): Promise<void>;
}

interface KeyRow {
  key_id: string;
  public_key_hex: string;
  private_seed_hex: string;
  valid_from: Date;
  valid_until: Date | null;
}

/** `pk_` + the first 16 hex characters of SHA-256(public key): stable, derivable by verifiers. */
export function platformKeyId(publicHex: string): string {
  return `pk_${createHash('sha256').update(Buffer.from(publicHex, 'hex')).digest('hex').slice(0, 16)}`;
}

/** A random secret kept in `platform_settings`, created by whichever instance starts first. */
async function ensureSecretSetting(db: Queryable, name: string, configured: string | undefined): Promise<Buffer> {
  if (configured) return Buffer.from(configured, 'utf8');
  await db.query('INSERT INTO platform_settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING', [
    name,
    randomBytes(32).toString('hex'),
  ]);
  const { rows } = await db.query<{ value: string }>('SELECT value FROM platform_settings WHERE name = $1', [name]);
  const value = rows[0]?.value;
  if (!value) throw new Error(`${name} missing after insert`);
  return Buffer.from(value, 'utf8');
}

async function ensureActiveKey(db: Db, configuredSeed: string | undefined): Promise<KeyRow> {
  return db.transaction(async (tx) => {
    // Serialises first start across instances sharing one database.
    await tx.query('SELECT pg_advisory_xact_lock($1)', [5_318_009]);
    const { rows } = await tx.query<KeyRow>('SELECT * FROM platform_keys WHERE valid_until IS NULL');
    const current = rows[0];
    const wanted = configuredSeed ? privateKeyFromSeedHex(configuredSeed) : undefined;
    const wantedPublic = wanted ? publicKeyHex(wanted) : undefined;
    if (current && (!wantedPublic || current.public_key_hex === wantedPublic)) return current;
    // No active key yet, or SVC_SIGNING_KEY names a new one: retire the old (kept for verification).
    const key = wanted ?? generateEd25519().privateKey;
    const publicHex = publicKeyHex(key);
    await tx.query('UPDATE platform_keys SET valid_until = now() WHERE valid_until IS NULL');
    const inserted = await tx.query<KeyRow>(
      `INSERT INTO platform_keys (key_id, public_key_hex, private_seed_hex) VALUES ($1, $2, $3)
       ON CONFLICT (public_key_hex) DO UPDATE SET valid_until = NULL RETURNING *`,
      [platformKeyId(publicHex), publicHex, seedHex(key)],
    );
    const row = inserted.rows[0];
    if (!row) throw new Error('platform key insert returned nothing');
    return row;
  });
}

/**
 * Loads (creating on first start) the platform signing key and API-key pepper. They live in the
 * database so that every instance sharing it signs and hashes alike; `SVC_SIGNING_KEY` and
 * `SVC_KEY_PEPPER` override them.
 */
export async function loadPlatformSecrets(
  db: Db,
  config: Pick<Config, 'signingKeySeedHex' | 'keyPepper'>,
): Promise<PlatformSecrets> {
  const pepper = await ensureSecretSetting(db, 'api_key_pepper', config.keyPepper);
  const sessionSecret = await ensureSecretSetting(db, 'session_secret', undefined);
  const row = await ensureActiveKey(db, config.signingKeySeedHex);
  const secrets: PlatformSecrets = {
    active: activeOf(row),
    pepper,
    sessionSecret,
    async listKeys() {
      const { rows } = await db.query<PlatformKey>(
        'SELECT key_id, public_key_hex, valid_from, valid_until FROM platform_keys ORDER BY valid_from',
      );
      return rows;
    },
    async reload(within = db) {
      const { rows } = await within.query<KeyRow>('SELECT * FROM platform_keys WHERE valid_until IS NULL');
      if (rows[0]) secrets.active = activeOf(rows[0]);
    },
  };
  return secrets;
}

function activeOf(row: KeyRow): PlatformSecrets['active'] {
  return {
    key_id: row.key_id,
    public_key_hex: row.public_key_hex,
    valid_from: row.valid_from,
    valid_until: row.valid_until,
    privateKey: privateKeyFromSeedHex(row.private_seed_hex),
  };
}

/**
 * Retires the active platform key (its `valid_until` becomes now; it stays published, so what it
 * signed stays verifiable) and makes a new one active, in one transaction. Running servers
 * switch on the `keys` bus message their caller publishes.
 *
 * @example
 * const { retired, active } = await rotatePlatformKey(db);
 */
export async function rotatePlatformKey(db: Db): Promise<{ retired: PlatformKey | undefined; active: PlatformKey }> {
  return db.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [5_318_009]);
    const { rows } = await tx.query<KeyRow>(
      'UPDATE platform_keys SET valid_until = now() WHERE valid_until IS NULL RETURNING *',
    );
    const key = generateEd25519().privateKey;
    const publicHex = publicKeyHex(key);
    const inserted = await tx.query<KeyRow>(
      'INSERT INTO platform_keys (key_id, public_key_hex, private_seed_hex, valid_from) VALUES ($1, $2, $3, clock_timestamp()) RETURNING *',
      [platformKeyId(publicHex), publicHex, seedHex(key)],
    );
    const row = inserted.rows[0];
    if (!row) throw new Error('platform key insert returned nothing');
    const strip = (r: KeyRow): PlatformKey => ({
      key_id: r.key_id,
      public_key_hex: r.public_key_hex,
      valid_from: r.valid_from,
      valid_until: r.valid_until,
    });
    return { retired: rows[0] ? strip(rows[0]) : undefined, active: strip(row) };
  });
}

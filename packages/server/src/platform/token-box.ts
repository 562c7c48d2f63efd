import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from 'node:crypto';
import type { Queryable } from './db/index.js';

/**
 * Encryption at rest for third-party secrets the platform keeps (repository host tokens):
 * AES-256-GCM under a 32-byte key derived with HKDF-SHA256 from a random master secret kept in
 * `platform_settings` (`token_key:<id>`), shared by every instance on the database. The sealed
 * text names its key id, so a rotation (`rotateTokenKey`) only changes which key seals: anything
 * sealed under an older key still opens. Tokens are never logged and never returned.
 *
 * Sealed form: `v1.<key_id>.<iv b64url>.<tag b64url>.<ciphertext b64url>`; the key id and the
 * purpose are bound as additional authenticated data, so a sealed value moved to another key id
 * or purpose does not open.
 */
export interface TokenBox {
  /** The id of the key new values are sealed with. */
  readonly currentKeyId: string;
  seal(plain: string, purpose: string): { sealed: string; keyId: string };
  open(sealed: string, purpose: string): string;
}

const CURRENT = 'token_key_current';
const PREFIX = 'token_key:';

function deriveKey(master: string): Buffer {
  return Buffer.from(hkdfSync('sha256', Buffer.from(master, 'utf8'), Buffer.alloc(0), 'svc-token-box-v1', 32));
}

function keyIdOf(master: string): string {
  return `tk_${createHash('sha256').update(`svc-token-key-id\n${master}`).digest('hex').slice(0, 12)}`;
}

async function addKey(db: Queryable): Promise<string> {
  const master = randomBytes(32).toString('hex');
  const id = keyIdOf(master);
  await db.query('INSERT INTO platform_settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING', [
    `${PREFIX}${id}`,
    master,
  ]);
  return id;
}

/**
 * Loads every token key (creating the first on first use) and answers a box sealing with the
 * current one.
 *
 * @example
 * const box = await loadTokenBox(ctx.db);
 * const { sealed, keyId } = box.seal('ghp_...', 'repo:wr_1');
 * box.open(sealed, 'repo:wr_1'); // 'ghp_...'
 */
export async function loadTokenBox(db: Queryable): Promise<TokenBox> {
  const first = await db.query<{ value: string }>('SELECT value FROM platform_settings WHERE name = $1', [CURRENT]);
  if (!first.rows[0]) {
    const id = await addKey(db);
    await db.query('INSERT INTO platform_settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING', [
      CURRENT,
      id,
    ]);
  }
  const { rows } = await db.query<{ name: string; value: string }>(
    "SELECT name, value FROM platform_settings WHERE name = $1 OR name LIKE 'token\\_key:%'",
    [CURRENT],
  );
  const current = rows.find((r) => r.name === CURRENT)?.value;
  const keys = new Map(
    rows.filter((r) => r.name.startsWith(PREFIX)).map((r) => [r.name.slice(PREFIX.length), deriveKey(r.value)]),
  );
  const currentKey = current === undefined ? undefined : keys.get(current);
  if (current === undefined || currentKey === undefined)
    throw new Error('the current token key is missing from platform_settings');
  const aad = (keyId: string, purpose: string) => Buffer.from(`v1\n${keyId}\n${purpose}`, 'utf8');
  return {
    currentKeyId: current,
    seal(plain, purpose) {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', currentKey, iv);
      cipher.setAAD(aad(current, purpose));
      const ct = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
      const parts = [iv, cipher.getAuthTag(), ct].map((b) => b.toString('base64url'));
      return { sealed: ['v1', current, ...parts].join('.'), keyId: current };
    },
    open(sealed, purpose) {
      const [version, keyId = '', iv = '', tag = '', ct = ''] = sealed.split('.');
      const key = keys.get(keyId);
      if (version !== 'v1' || key === undefined) throw new Error(`no token key ${keyId} to open this value`);
      const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
      decipher.setAAD(aad(keyId, purpose));
      decipher.setAuthTag(Buffer.from(tag, 'base64url'));
      return Buffer.concat([decipher.update(Buffer.from(ct, 'base64url')), decipher.final()]).toString('utf8');
    },
  };
}

/**
 * Makes a new token key current. Values sealed before stay readable (their key is kept);
 * re-sealing them under the new key is up to their owner module. Processes pick the new key up
 * at their next `loadTokenBox`.
 *
 * @example
 * const keyId = await rotateTokenKey(db);
 */
export async function rotateTokenKey(db: Queryable): Promise<string> {
  const id = await addKey(db);
  await db.query(
    'INSERT INTO platform_settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value',
    [CURRENT, id],
  );
  return id;
}

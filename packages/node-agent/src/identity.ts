import type { KeyObject } from 'node:crypto';
import { chmod, mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { generateEd25519, isLowerHex, privateKeyFromSeedHex, publicKeyHex, seedHex } from '@svc/protocol';
import { writeFileAtomic } from './fs-atomic.js';

/** File names inside the data dir (docs/node-operator.md describes the layout). */
export const NODE_KEY_FILE = 'node-key.json';
export const NODE_RECORD_FILE = 'node.json';

/** The node's Ed25519 identity. */
export interface NodeIdentity {
  privateKey: KeyObject;
  /** Raw public key, 64 lowercase hex characters: the node's `pubkey`. */
  publicKeyHex: string;
}

/** What `node.json` holds after a successful registration. */
export interface NodeRecord {
  node_id: string;
  server: string;
}

/** The data dir holds a key file we cannot use; we refuse rather than replace an identity. */
export class IdentityError extends Error {
  override name = 'IdentityError';
}

/**
 * Loads the node key from `<dataDir>/node-key.json`, or creates it (mode 0600, the data dir
 * 0700) on first start. A key file that exists but does not parse, or whose public key does not
 * match its seed, is an {@link IdentityError}: replacing it would silently make a new node.
 *
 * @example
 * const identity = await loadOrCreateIdentity('./.svc-node');
 * identity.publicKeyHex; // the same on every start
 */
export async function loadOrCreateIdentity(dataDir: string): Promise<NodeIdentity> {
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  const path = join(dataDir, NODE_KEY_FILE);
  let text: string | undefined;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
  if (text === undefined) {
    const { privateKey } = generateEd25519();
    const identity = { privateKey, publicKeyHex: publicKeyHex(privateKey) };
    const file = { seed_hex: seedHex(privateKey), public_key_hex: identity.publicKeyHex };
    await writeFileAtomic(path, `${JSON.stringify(file, null, 2)}\n`, 0o600);
    return identity;
  }
  await chmod(path, 0o600);
  return parseKeyFile(text, path);
}

function parseKeyFile(text: string, path: string): NodeIdentity {
  let file: unknown;
  try {
    file = JSON.parse(text);
  } catch {
    throw new IdentityError(`${path} is not valid JSON; restore it from a backup or move it away to make a new node`);
  }
  const seed = typeof file === 'object' && file !== null && 'seed_hex' in file ? file.seed_hex : undefined;
  const pub = typeof file === 'object' && file !== null && 'public_key_hex' in file ? file.public_key_hex : undefined;
  if (!isLowerHex(seed, 32)) throw new IdentityError(`${path}: seed_hex must be 64 lowercase hex characters`);
  const privateKey = privateKeyFromSeedHex(seed);
  const derived = publicKeyHex(privateKey);
  if (pub !== undefined && pub !== derived) {
    throw new IdentityError(`${path}: public_key_hex does not match seed_hex; the file is corrupt`);
  }
  return { privateKey, publicKeyHex: derived };
}

/**
 * The registration record from `<dataDir>/node.json`, or `undefined` before the first
 * registration (or when the file is unreadable: it is informational, the key is the identity).
 *
 * @example
 * (await readNodeRecord(dataDir))?.node_id; // 'node_...'
 */
export async function readNodeRecord(dataDir: string): Promise<NodeRecord | undefined> {
  try {
    const value: unknown = JSON.parse(await readFile(join(dataDir, NODE_RECORD_FILE), 'utf8'));
    if (typeof value !== 'object' || value === null) return undefined;
    const { node_id, server } = value as Record<string, unknown>;
    return typeof node_id === 'string' && typeof server === 'string' ? { node_id, server } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Saves the registration record to `<dataDir>/node.json` (atomically, mode 0600).
 *
 * @example
 * await writeNodeRecord(dataDir, { node_id: 'node_123', server: 'https://svc.example' });
 */
export async function writeNodeRecord(dataDir: string, record: NodeRecord): Promise<void> {
  await mkdir(dataDir, { recursive: true, mode: 0o700 });
  const body = { node_id: record.node_id, server: record.server };
  await writeFileAtomic(join(dataDir, NODE_RECORD_FILE), `${JSON.stringify(body, null, 2)}\n`, 0o600);
}

function isNotFound(err: unknown): boolean {
  return typeof err === 'object' && err !== null && 'code' in err && err.code === 'ENOENT';
}

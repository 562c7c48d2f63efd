import { randomBytes } from 'node:crypto';
import { mkdir, open, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { AuditedTree } from './log-audit.js';

// What `svc log watch` keeps in its state directory between runs: the log keys it trusts, the
// last checkpoint it verified (the signed note itself, so that a later contradiction can be shown
// with both signatures) and the audited tree's right edge. Written atomically (a fresh file,
// flushed, renamed over the old one): a monitor killed mid-write keeps the previous state.

const STATE_FILE = 'state.json';

/** The monitor's kept state. */
export interface WatchState {
  /** Note verifier keys trusted for this log (from --log-key, or first use). */
  log_keys: string[];
  /** The last checkpoint verified, as the server signed it. */
  checkpoint: string;
  checked_at: string;
  tree: AuditedTree;
}

const b64 = (hs: readonly Buffer[]) => hs.map((h) => h.toString('base64'));
const strings = (v: unknown): v is string[] => Array.isArray(v) && v.every((x) => typeof x === 'string');

/**
 * The state kept in `dir`, or undefined before the first checkpoint; throws on a file this
 * command did not write.
 *
 * @example
 * const kept = await loadWatchState(dir);
 */
export async function loadWatchState(dir: string): Promise<WatchState | undefined> {
  let text: string;
  try {
    text = await readFile(join(dir, STATE_FILE), 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  const bad = new Error(`${join(dir, STATE_FILE)} is not a state svc log watch wrote`);
  let parsed: Record<string, unknown>;
  try {
    parsed = JSON.parse(text) as Record<string, unknown>;
  } catch {
    throw bad;
  }
  const { log_keys, checkpoint, checked_at, tree_size, edge, tail } = parsed;
  if (
    parsed.version !== 1 ||
    !strings(log_keys) ||
    typeof checkpoint !== 'string' ||
    typeof checked_at !== 'string' ||
    typeof tree_size !== 'number' ||
    !Number.isSafeInteger(tree_size) ||
    !strings(edge) ||
    !strings(tail)
  )
    throw bad;
  const hashes = (list: string[]) => list.map((h) => Buffer.from(h, 'base64'));
  return { log_keys, checkpoint, checked_at, tree: { size: tree_size, edge: hashes(edge), tail: hashes(tail) } };
}

/**
 * Writes `state` to `dir` atomically.
 *
 * @example
 * await saveWatchState(dir, { log_keys, checkpoint: note, checked_at: new Date().toISOString(), tree });
 */
export async function saveWatchState(dir: string, state: WatchState): Promise<void> {
  await mkdir(dir, { recursive: true });
  const text = `${JSON.stringify(
    {
      version: 1,
      log_keys: state.log_keys,
      checkpoint: state.checkpoint,
      checked_at: state.checked_at,
      tree_size: state.tree.size,
      edge: b64(state.tree.edge),
      tail: b64(state.tree.tail),
    },
    null,
    2,
  )}\n`;
  const temporary = join(dir, `.${STATE_FILE}.${randomBytes(6).toString('hex')}`);
  const file = await open(temporary, 'wx');
  try {
    await file.writeFile(text);
    await file.sync();
  } finally {
    await file.close();
  }
  await rename(temporary, join(dir, STATE_FILE));
}

/**
 * Writes the evidence of a contradiction (`kind` fork or rollback) to `dir/<kind>-<time>.txt`:
 * the explanation and both signed checkpoints. Returns the file's path.
 *
 * @example
 * const file = await writeEvidence(dir, 'fork', text);
 */
export async function writeEvidence(dir: string, kind: 'fork' | 'rollback', text: string): Promise<string> {
  await mkdir(dir, { recursive: true });
  const path = join(dir, `${kind}-${new Date().toISOString().replace(/[:.]/g, '-')}.txt`);
  await writeFile(path, text, { flag: 'wx' });
  return path;
}

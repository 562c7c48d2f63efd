import { randomBytes } from 'node:crypto';
import {
  closeSync,
  ftruncateSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  truncateSync,
  unlinkSync,
  writeSync,
} from 'node:fs';
import { mkdir, readdir, readFile, rename, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { sha256Hex, signSvc1 } from '@svc/protocol';
import { writeFileAtomic } from './fs-atomic.js';
import type { NodeIdentity } from './identity.js';
import type { RunOutput } from './runners/types.js';
import { WORK_ID_PATTERN, type ReceiptMetadata, type ReceiptUpload, type ResultUpload, type WorkItem } from './wire.js';

/** A signed result waiting to be delivered: exactly what `outbox/<work_id>.json` holds. */
export interface OutboxEntry extends ResultUpload {
  work_id: string;
  job_id: string;
  receipt: ReceiptUpload;
}

/**
 * Turns a finished run into its outbox entry: `result_hash` is the SHA-256 of the result bytes
 * and `receipt.signature` the SVC1 signature over (job_id, node key, result_hash, units). A
 * result that claims UTF-8 but is not valid UTF-8 travels as base64, so the server decodes
 * exactly the hashed bytes.
 *
 * @example
 * const entry = sealResult({ item, run, identity, metadata: { engine: run.engine, duration_ms: 812 } });
 */
export function sealResult(input: {
  item: WorkItem;
  run: RunOutput;
  identity: NodeIdentity;
  metadata: ReceiptMetadata;
}): OutboxEntry {
  const { item, run, identity, metadata } = input;
  const result_hash = sha256Hex(run.bytes);
  const asText = run.bytes.toString('utf8');
  const utf8 = run.encoding === 'utf8' && Buffer.from(asText, 'utf8').equals(run.bytes);
  const fields = {
    job_id: item.job_id,
    node_public_key_hex: identity.publicKeyHex,
    result_hash_hex: result_hash,
    metering_units: run.metering_units,
  };
  const signature = signSvc1(fields, identity.privateKey);
  return {
    work_id: item.work_id,
    job_id: item.job_id,
    output: utf8 ? asText : run.bytes.toString('base64'),
    encoding: utf8 ? 'utf8' : 'base64',
    content_type: run.content_type,
    result_hash,
    metering_units: run.metering_units,
    usage: run.usage,
    ...(run.exit_code === undefined ? {} : { exit_code: run.exit_code }),
    receipt: {
      job_id: item.job_id,
      pubkey: identity.publicKeyHex,
      result_hash,
      signature,
      metering_units: run.metering_units,
      metadata,
      // Gateway work sent before the server stored its opening: returned unchanged, also on a re-send.
      ...(item.ticket ? { ticket: item.ticket } : {}),
    },
  };
}

/**
 * The body of `POST .../result` for an entry; the same entry always gives the same bytes.
 *
 * @example
 * await client.uploadResult(entry.work_id, resultBody(entry));
 */
export function resultBody(entry: OutboxEntry): ResultUpload {
  return {
    output: entry.output,
    encoding: entry.encoding,
    content_type: entry.content_type,
    result_hash: entry.result_hash,
    metering_units: entry.metering_units,
    usage: entry.usage,
    ...(entry.exit_code === undefined ? {} : { exit_code: entry.exit_code }),
  };
}

export interface Outbox {
  readonly dir: string;
  /**
   * Keeps the entry; call before uploading anything. Durable (the default): its own file
   * `<work_id>.json`, written atomically (tmp file + rename) and fsynced. `durable: false`
   * (gateway work): one line appended to the outbox journal, no fsync: the entry survives the
   * process's death, not the machine's.
   */
  put(entry: OutboxEntry, options?: { durable?: boolean }): Promise<void>;
  /** Entries kept and not yet removed (also those of an earlier run), and the names of files that are not valid entries. */
  list(): Promise<{ entries: OutboxEntry[]; invalid: string[] }>;
  /** Delivered (acknowledged): forget it. */
  remove(workId: string): Promise<void>;
  /** The server refused the entry for good: keep it in `outbox/rejected/` for the operator. */
  reject(fileOrWorkId: string): Promise<void>;
}

/** Outbox journal files: `outbox/journal-<ms>-<random>.ndjson`, one JSON line per entry or tombstone. */
const JOURNAL = /^journal-[0-9a-z-]+\.ndjson$/;
/** A journal takes this many entries before the next one starts (it is deleted once all are removed). */
export const JOURNAL_ENTRIES = 256;

interface Journal {
  name: string;
  /** Open for appending; undefined for a journal of an earlier run until something is appended. */
  fd: number | undefined;
  /** Entry lines written to it (since it was last emptied). */
  written: number;
  /** Its entries not yet removed. */
  live: Set<string>;
  /** It holds lines that are neither entries nor tombstones (kept in rejected/ when it retires). */
  bad: boolean;
}

/** A journal's content: live entries (not tombstoned) and whether a line other than a torn last one is invalid. */
function readJournal(text: string): { entries: Map<string, OutboxEntry>; bad: boolean } {
  const entries = new Map<string, OutboxEntry>();
  let bad = false;
  const lines = text.split('\n');
  // The last piece is empty after a complete line, or a line torn by a kill during its write:
  // never sent (a line is sent only once written), so nothing is lost with it.
  lines.pop();
  for (const line of lines) {
    if (line === '') continue;
    const done = parseTombstone(line);
    if (done !== undefined) {
      entries.delete(done);
      continue;
    }
    const entry = parseEntry(line);
    if (entry === undefined) bad = true;
    else entries.set(entry.work_id, entry);
  }
  return { entries, bad };
}

function parseTombstone(line: string): string | undefined {
  if (!line.startsWith('{"done":')) return undefined;
  try {
    const value = JSON.parse(line) as { done?: unknown };
    return typeof value.done === 'string' ? value.done : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The work ids whose signed entries wait in the outbox of `dataDir` (their own files, and journal
 * entries not yet removed), read from disk: what a restarted agent would send again.
 *
 * @example
 * expect(outboxWorkIds(dataDir)).toEqual([]);
 */
export function outboxWorkIds(dataDir: string): string[] {
  const dir = join(dataDir, 'outbox');
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  const ids: string[] = [];
  for (const name of names) {
    if (name.endsWith('.json') && !name.startsWith('.')) ids.push(name.slice(0, -'.json'.length));
    else if (JOURNAL.test(name)) {
      const text = (() => {
        try {
          return readFileSync(join(dir, name), 'utf8');
        } catch {
          return '';
        }
      })();
      ids.push(...readJournal(text).entries.keys());
    }
  }
  return ids.sort();
}

/**
 * The outbox in `<dataDir>/outbox`: signed results not yet delivered. It is what makes a crash
 * between signing and uploading harmless: after a restart the agent re-uploads these exact bytes
 * and never signs a second, different result for the same work.
 *
 * Durable entries (marketplace jobs) are files of their own, fsynced. Gateway entries
 * (`durable: false`) are lines appended to a journal (docs/decisions.md, "The outbox journal"):
 * creating, renaming and deleting a file per request cost the node more CPU than anything else it
 * does per request. A removed entry appends a tombstone; a journal whose entries are all removed
 * is emptied (the one taking entries) or deleted; after {@link JOURNAL_ENTRIES} entries the next
 * journal starts. The journal is read from disk once, at the first call; the outbox is then the
 * only writer (one agent per data dir).
 *
 * @example
 * const outbox = createOutbox(dataDir);
 * await outbox.put(entry);
 */
export function createOutbox(dataDir: string): Outbox {
  const dir = join(dataDir, 'outbox');
  const fileOf = (workId: string) => {
    if (!WORK_ID_PATTERN.test(workId)) throw new Error(`unsafe work id ${JSON.stringify(workId)}`);
    return join(dir, `${workId}.json`);
  };
  const journaled = new Map<string, { entry: OutboxEntry; journal: Journal }>();
  let active: Journal | undefined;
  let loaded = false;
  let dirMade = false;

  const makeDir = () => {
    if (dirMade) return;
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    dirMade = true;
  };
  /** The journals an earlier run left: their live entries join the outbox; empty ones go. */
  const load = () => {
    if (loaded) return;
    loaded = true;
    let names: string[];
    try {
      names = readdirSync(dir).filter((name) => JOURNAL.test(name));
    } catch {
      return;
    }
    for (const name of names.sort()) {
      const path = join(dir, name);
      const text = readFileSync(path, 'utf8');
      // A line torn by a kill during its write was never sent: cut it, so that appends start on a line of their own.
      if (text !== '' && !text.endsWith('\n'))
        truncateSync(path, Buffer.byteLength(text.slice(0, text.lastIndexOf('\n') + 1)));
      const { entries, bad } = readJournal(text);
      const journal: Journal = { name, fd: undefined, written: entries.size, live: new Set(entries.keys()), bad };
      for (const [workId, entry] of entries) journaled.set(workId, { entry, journal });
      if (journal.live.size === 0) retire(journal);
    }
  };
  const append = (journal: Journal, line: string) => {
    journal.fd ??= openSync(join(dir, journal.name), 'a', 0o600);
    writeSync(journal.fd, line);
  };
  /** All its entries are removed: the active journal is emptied for more, any other deleted. */
  const retire = (journal: Journal) => {
    if (journal === active && journal.fd !== undefined && !journal.bad) {
      ftruncateSync(journal.fd, 0);
      journal.written = 0;
      return;
    }
    if (journal.fd !== undefined) closeSync(journal.fd);
    journal.fd = undefined;
    if (journal === active) active = undefined;
    const path = join(dir, journal.name);
    if (journal.bad) {
      mkdirSync(join(dir, 'rejected'), { recursive: true, mode: 0o700 });
      renameSync(path, join(dir, 'rejected', journal.name));
    } else
      try {
        unlinkSync(path);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      }
  };
  const journalPut = (entry: OutboxEntry) => {
    load();
    makeDir();
    // Signed again for the same work (it came back to this node): the later entry replaces the earlier.
    if (journaled.has(entry.work_id)) journalRemove(entry.work_id);
    if (active === undefined || active.written >= JOURNAL_ENTRIES) {
      // A full journal stays until its last entry is removed (then deleted); the next one takes entries.
      active = {
        name: `journal-${Date.now()}-${randomBytes(4).toString('hex')}.ndjson`,
        fd: undefined,
        written: 0,
        live: new Set(),
        bad: false,
      };
    }
    const journal = active;
    try {
      append(journal, `${JSON.stringify(entry)}\n`);
    } catch (err) {
      // The directory went away under the agent: make it again, once.
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      dirMade = false;
      makeDir();
      append(journal, `${JSON.stringify(entry)}\n`);
    }
    journal.written++;
    journal.live.add(entry.work_id);
    journaled.set(entry.work_id, { entry, journal });
  };
  const journalRemove = (workId: string): boolean => {
    load();
    const kept = journaled.get(workId);
    if (kept === undefined) return false;
    journaled.delete(workId);
    const { journal } = kept;
    journal.live.delete(workId);
    if (journal.live.size === 0) retire(journal);
    else append(journal, `${JSON.stringify({ done: workId })}\n`);
    return true;
  };

  return {
    dir,
    async put(entry, options = {}) {
      if (options.durable === false) {
        journalPut(entry);
        return;
      }
      makeDir();
      const write = () =>
        writeFileAtomic(fileOf(entry.work_id), `${JSON.stringify(entry)}\n`, 0o600, { durable: true });
      await write().catch(async (err: NodeJS.ErrnoException) => {
        // The directory went away under the agent: make it again, once.
        if (err.code !== 'ENOENT') throw err;
        dirMade = false;
        makeDir();
        await write();
      });
    },
    async list() {
      load();
      let names: string[];
      try {
        names = (await readdir(dir)).filter((name) => name.endsWith('.json') && !name.startsWith('.')).sort();
      } catch {
        names = [];
      }
      const entries: OutboxEntry[] = [];
      const invalid: string[] = [];
      for (const name of names) {
        const entry = parseEntry(await readFile(join(dir, name), 'utf8').catch(() => ''));
        if (entry !== undefined && `${entry.work_id}.json` === name) entries.push(entry);
        else invalid.push(name);
      }
      for (const { entry } of journaled.values()) entries.push(entry);
      return { entries, invalid };
    },
    async remove(workId) {
      if (journalRemove(workId)) return;
      await unlink(fileOf(workId)).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'ENOENT') throw err;
      });
    },
    async reject(fileOrWorkId) {
      const name = fileOrWorkId.endsWith('.json') ? fileOrWorkId : `${fileOrWorkId}.json`;
      await mkdir(join(dir, 'rejected'), { recursive: true, mode: 0o700 });
      const kept = journaled.get(name.slice(0, -'.json'.length));
      if (kept !== undefined) {
        await writeFileAtomic(join(dir, 'rejected', name), `${JSON.stringify(kept.entry)}\n`, 0o600, {
          durable: false,
        });
        journalRemove(kept.entry.work_id);
        return;
      }
      await rename(join(dir, name), join(dir, 'rejected', name)).catch(() => undefined);
    },
  };
}

function parseEntry(text: string): OutboxEntry | undefined {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null) return undefined;
  const e = value as Partial<OutboxEntry>;
  const ok =
    typeof e.work_id === 'string' &&
    WORK_ID_PATTERN.test(e.work_id) &&
    typeof e.job_id === 'string' &&
    typeof e.output === 'string' &&
    (e.encoding === 'utf8' || e.encoding === 'base64') &&
    typeof e.result_hash === 'string' &&
    typeof e.receipt === 'object' &&
    e.receipt !== null &&
    sha256Hex(Buffer.from(e.output, e.encoding)) === e.result_hash;
  return ok ? (value as OutboxEntry) : undefined;
}

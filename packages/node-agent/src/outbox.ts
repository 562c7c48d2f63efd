import { mkdir, readdir, readFile, rename, rm } from 'node:fs/promises';
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
   * Writes the entry atomically (tmp file + rename); call before uploading anything. `durable:
   * false` skips the fsyncs: the entry survives the process's death, not the machine's.
   */
  put(entry: OutboxEntry, options?: { durable?: boolean }): Promise<void>;
  /** Entries left by an earlier run, and the names of files that are not valid entries. */
  list(): Promise<{ entries: OutboxEntry[]; invalid: string[] }>;
  /** Both uploads succeeded. */
  remove(workId: string): Promise<void>;
  /** The server refused the entry for good: keep it in `outbox/rejected/` for the operator. */
  reject(fileOrWorkId: string): Promise<void>;
}

/**
 * The outbox in `<dataDir>/outbox`: signed results not yet delivered. It is what makes a crash
 * between signing and uploading harmless: after a restart the agent re-uploads these exact bytes
 * and never signs a second, different result for the same work.
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
  return {
    dir,
    async put(entry, options = {}) {
      await mkdir(dir, { recursive: true, mode: 0o700 });
      await writeFileAtomic(fileOf(entry.work_id), `${JSON.stringify(entry)}\n`, 0o600, {
        durable: options.durable ?? true,
      });
    },
    async list() {
      let names: string[];
      try {
        names = (await readdir(dir)).filter((name) => name.endsWith('.json') && !name.startsWith('.')).sort();
      } catch {
        return { entries: [], invalid: [] };
      }
      const entries: OutboxEntry[] = [];
      const invalid: string[] = [];
      for (const name of names) {
        const entry = parseEntry(await readFile(join(dir, name), 'utf8').catch(() => ''));
        if (entry !== undefined && `${entry.work_id}.json` === name) entries.push(entry);
        else invalid.push(name);
      }
      return { entries, invalid };
    },
    async remove(workId) {
      await rm(fileOf(workId), { force: true });
    },
    async reject(fileOrWorkId) {
      const name = fileOrWorkId.endsWith('.json') ? fileOrWorkId : `${fileOrWorkId}.json`;
      await mkdir(join(dir, 'rejected'), { recursive: true, mode: 0o700 });
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

import {
  checkConsistency,
  openNote,
  parseCheckpoint,
  parseNoteVerifierKey,
  type Checkpoint,
  type NoteVerifierKey,
} from '@svc/protocol/verify';
import { parseArgs, UsageError } from './args.js';
import { auditLeaves, EMPTY_TREE, type AuditSource } from './log-audit.js';
import { loadWatchState, saveWatchState, writeEvidence, type WatchState } from './log-state.js';
import { LOG_USAGE } from './usage.js';

// `svc log watch`: a monitor of a deployment's transparency log (DESIGN.md section 17,
// docs/transparency-log.md). Each check fetches the signed checkpoint, verifies it, proves it
// consistent with the last one kept (the server's consistency proof, and the new leaves' hashes
// from the tiles on the kept right edge), and keeps it. Two signed checkpoints that contradict
// each other are printed and written to the state directory: anyone can check them, so they are
// the evidence of a fork. The CLI fetches nothing but the URL the user gave.

/** Where the command writes (the process's streams; tests capture them). */
export interface LogIo {
  out: (text: string) => void;
  err: (text: string) => void;
}

const processIo: LogIo = {
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
};

const FETCH_TIMEOUT_MS = 30_000;
const MAX_BODY_BYTES = 1024 * 1024;

/** The server could not be asked: a warning, not a verdict. */
class Unreachable extends Error {}

async function get(base: string, path: string): Promise<Buffer> {
  const url = `${base}${path}`;
  let res: Response;
  try {
    // No redirects: the monitor talks to the URL the user gave and nothing else.
    res = await fetch(url, { redirect: 'error', signal: AbortSignal.timeout(FETCH_TIMEOUT_MS) });
  } catch (err) {
    const cause = err instanceof Error && err.cause instanceof Error ? `: ${err.cause.message}` : '';
    throw new Unreachable(`cannot reach ${url} (${err instanceof Error ? err.message : String(err)}${cause})`);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of res.body ?? []) {
    size += (chunk as Uint8Array).length;
    if (size > MAX_BODY_BYTES) throw new Unreachable(`${url} answered more than ${MAX_BODY_BYTES} bytes`);
    chunks.push(Buffer.from(chunk as Uint8Array));
  }
  const body = Buffer.concat(chunks);
  if (!res.ok) throw new Unreachable(`${url} answered ${res.status}: ${body.toString('utf8').slice(0, 200)}`);
  return body;
}

function jsonOf(body: Buffer, url: string): unknown {
  try {
    return JSON.parse(body.toString('utf8'));
  } catch {
    throw new Unreachable(`${url} did not answer JSON`);
  }
}

function sourceOf(base: string): AuditSource {
  return {
    tile: (path) => get(base, `/api/v1/log/${path}`),
    async consistency(from, to) {
      const path = `/api/v1/log/proof/consistency?from=${from}&to=${to}`;
      const body = jsonOf(await get(base, path), `${base}${path}`);
      const proof = typeof body === 'object' && body !== null && 'proof' in body ? body.proof : undefined;
      return Array.isArray(proof) ? proof.filter((h): h is string => typeof h === 'string') : [];
    },
  };
}

async function parseKeys(vkeys: readonly string[], what: string): Promise<NoteVerifierKey[]> {
  const keys: NoteVerifierKey[] = [];
  for (const vkey of vkeys) {
    const parsed = await parseNoteVerifierKey(vkey);
    if ('problem' in parsed) throw new UsageError(`${what} ${vkey}: ${parsed.problem}`);
    keys.push(parsed);
  }
  return keys;
}

/** The log keys: --log-key, else those kept, else the server's on first use (said so). */
async function logKeys(base: string, pinned: readonly string[], kept: WatchState | undefined, io: LogIo) {
  if (pinned.length > 0) return { vkeys: [...pinned], keys: await parseKeys(pinned, '--log-key') };
  if (kept) return { vkeys: kept.log_keys, keys: await parseKeys(kept.log_keys, 'kept log key') };
  const body = jsonOf(await get(base, '/api/v1/keys/platform'), `${base}/api/v1/keys/platform`);
  const log = typeof body === 'object' && body !== null && 'log' in body ? body.log : undefined;
  const listed = typeof log === 'object' && log !== null && 'verifier_keys' in log ? log.verifier_keys : undefined;
  const vkeys = Array.isArray(listed) ? listed.filter((k): k is string => typeof k === 'string') : [];
  if (vkeys.length === 0) throw new Unreachable(`${base} lists no log verifier keys: give one with --log-key`);
  io.out(`trusting on first use the log keys ${base} lists (pin them with --log-key): ${vkeys.join(' ')}\n`);
  return { vkeys, keys: await parseKeys(vkeys, 'the server lists log key') };
}

async function contradiction(
  dir: string,
  io: LogIo,
  kind: 'fork' | 'rollback',
  headline: string,
  kept: WatchState,
  note: string,
): Promise<number> {
  const text = `svc log watch: ${headline}\n\nkept checkpoint (verified ${kept.checked_at}):\n${kept.checkpoint}\nnew checkpoint (fetched ${new Date().toISOString()}):\n${note}`;
  const file = await writeEvidence(dir, kind, text);
  io.out(`${kind.toUpperCase()}  ${text}\nboth signed checkpoints written to ${file}\n`);
  return 1;
}

/** One check of the log: 0 consistent (kept), 1 a contradiction or a bad checkpoint, 2 the server could not be asked. */
async function checkOnce(base: string, dir: string, pinned: readonly string[], io: LogIo): Promise<number> {
  const kept = await loadWatchState(dir);
  try {
    const { vkeys, keys } = await logKeys(base, pinned, kept, io);
    const note = (await get(base, '/api/v1/log/checkpoint')).toString('utf8');
    const opened = await openNote(note, keys);
    const parsed: Checkpoint | { problem: string } = 'problem' in opened ? opened : parseCheckpoint(opened.text);
    if ('problem' in parsed) {
      io.out(`FAIL  the checkpoint of ${base} does not verify: ${parsed.problem}\n${note}\n`);
      return 1;
    }
    const { tree_size: size, root_hash_b64: root } = parsed;
    const tree = kept?.tree ?? EMPTY_TREE;
    if (kept && size < tree.size)
      return contradiction(
        dir,
        io,
        'rollback',
        `rollback: the log shrank from ${tree.size} to ${size} records`,
        kept,
        note,
      );
    const keptRoot = kept && parseCheckpoint(kept.checkpoint.slice(0, kept.checkpoint.lastIndexOf('\n\n') + 1));
    const keptRootB64 = keptRoot && !('problem' in keptRoot) ? keptRoot.root_hash_b64 : '';
    if (kept && size === tree.size) {
      if (root !== keptRootB64)
        return contradiction(
          dir,
          io,
          'fork',
          `fork: two signed checkpoints of ${size} records with different roots`,
          kept,
          note,
        );
      io.out(`OK  ${parsed.origin}  size ${size}  root ${root}: unchanged since ${kept.checked_at}\n`);
      return 0;
    }
    if (kept && tree.size > 0) {
      const proof = await sourceOf(base).consistency(tree.size, size);
      if (!(await checkConsistency(proof, size, root, tree.size, keptRootB64)))
        return contradiction(
          dir,
          io,
          'fork',
          `fork: the server does not prove the checkpoint of ${size} records extends the kept one of ${tree.size}`,
          kept,
          note,
        );
    }
    const audit = await auditLeaves(sourceOf(base), tree, size, root);
    if (!audit.ok) {
      io.out(`FAIL  ${audit.problem}\nthe checkpoint it contradicts:\n${note}\n`);
      return 1;
    }
    const now = new Date().toISOString();
    await saveWatchState(dir, { log_keys: vkeys, checkpoint: note, checked_at: now, tree: audit.tree });
    io.out(
      `OK  ${parsed.origin}  size ${size}  root ${root}: ${
        kept
          ? `consistent with the kept size ${tree.size} (consistency proof; leaves ${tree.size}..${size - 1} from the tiles)`
          : `first checkpoint kept; its ${size} leaves audited from the tiles`
      }\n`,
    );
    return 0;
  } catch (err) {
    if (!(err instanceof Unreachable)) throw err;
    io.err(`WARN  ${err.message}: nothing checked, the kept checkpoint stays\n`);
    return 2;
  }
}

function baseUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UsageError(`'${raw}' is not a URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new UsageError(`the log's URL must be http or https, got ${url.protocol}`);
  if (url.search || url.hash) throw new UsageError('the log URL takes no query or fragment');
  return url.href.replace(/\/+$/, '');
}

/** Sleeps `ms`; resolves true at once when SIGINT or SIGTERM arrives (a clean stop). */
function pause(ms: number): Promise<boolean> {
  return new Promise((resolve) => {
    const stop = () => finish(true);
    const timer = setTimeout(() => finish(false), ms);
    function finish(stopped: boolean) {
      clearTimeout(timer);
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      resolve(stopped);
    }
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
}

/**
 * `svc log watch --state DIR URL [--once] [--interval SECONDS] [--log-key VKEY]`: exit 0 while
 * the log is consistent, 1 on a fork, a rollback or a leaf the signed tree does not hold, 2 on
 * bad usage or (with --once) an unreachable server.
 *
 * @example
 * process.exitCode = await log(['watch', '--state', dir, '--once', 'https://svc.example']);
 */
export async function log(argv: string[], io: LogIo = processIo): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub !== 'watch') throw new UsageError(`expected 'svc log watch'\n\n${LOG_USAGE}`);
  const args = parseArgs(rest, { values: ['state', 'interval', 'log-key'], booleans: ['once'] });
  const [raw, ...extra] = args.positionals;
  const dir = args.flags.state;
  if (!raw || extra.length > 0 || typeof dir !== 'string')
    throw new UsageError(`expected --state DIR and one URL\n\n${LOG_USAGE}`);
  const base = baseUrl(raw);
  const rawInterval = args.flags.interval;
  const seconds = typeof rawInterval === 'string' ? Number(rawInterval) : 60;
  if (!Number.isFinite(seconds) || seconds <= 0 || seconds > 86_400)
    throw new UsageError(`--interval must be a number of seconds in (0, 86400], got '${String(rawInterval)}'`);
  const pinned = args.multi['log-key'] ?? [];
  await parseKeys(pinned, '--log-key');
  if (args.flags.once === true) return checkOnce(base, dir, pinned, io);
  for (;;) {
    if ((await checkOnce(base, dir, pinned, io)) === 1) return 1;
    if (await pause(seconds * 1000)) return 0;
  }
}

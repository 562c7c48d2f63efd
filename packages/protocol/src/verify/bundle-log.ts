import { canonicalJson } from '../jcs.js';
import {
  checkInclusion,
  logLeafHashHex,
  noteVerifierKeyOf,
  openNote,
  parseCheckpoint,
  parseNoteVerifierKey,
  type NoteVerifierKey,
} from './log.js';

// The checks of a bundle's `verifier.log` (DESIGN.md section 17, docs/transparency-log.md): the
// run's leaf, its hash, the checkpoint's signature by a trusted key and the leaf's inclusion under
// that checkpoint. A bundle made before the log has no such section ("absent"); a run not yet in a
// checkpoint has `{status: "pending", leaf}`. Neither is a pass: each is reported under its own
// status, and only `requireLog` makes them fail (older bundles must keep verifying).

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

/** One log check; `status` marks a log entry that is absent or pending (neither passed nor failed). */
export interface LogCheck {
  name: string;
  ok: boolean;
  reason: string;
  status?: 'absent' | 'pending';
}

/** What the log checks trust and require. */
export interface LogCheckOptions {
  /** Platform public keys (hex) the user pinned: a checkpoint signed by one of them is trusted. */
  pinnedKeys?: readonly string[];
  /** Note verifier keys the user pinned (`svc verify --log-key`, a trust file's `log.verifier_keys`). */
  logKeys?: readonly string[];
  /** Fail a bundle whose log entry is absent or pending. */
  requireLog?: boolean;
}

/** The run as the bundle's graph and certificate describe it. */
export interface RunFacts {
  run: Obj;
  eventCount: number;
  certificateRoot: unknown;
  /** The public keys of the bundle's own `verifier.platform_keys`. */
  bundlePlatformKeys: readonly string[];
}

const LEAF_FIELDS = ['run_id', 'subject_type', 'subject_id', 'root_hash', 'event_count', 'closed_at'] as const;

function leafCheck(leaf: unknown, facts: RunFacts): LogCheck {
  const name = 'log_leaf';
  if (!isObj(leaf)) return { name, ok: false, reason: 'the log entry has no leaf' };
  const missing = LEAF_FIELDS.find((f) => !(f in leaf));
  if (missing) return { name, ok: false, reason: `the leaf has no ${missing}` };
  const { run } = facts;
  const expected: [string, unknown, unknown][] = [
    ['run_id', leaf.run_id, run.id],
    ['subject_id', leaf.subject_id, run.job_id],
    ['root_hash', leaf.root_hash, run.root_hash],
    ['root_hash', leaf.root_hash, facts.certificateRoot],
    ['event_count', leaf.event_count, facts.eventCount],
  ];
  const wrong = expected.find(([, got, want]) => got !== want);
  if (wrong)
    return {
      name,
      ok: false,
      reason: `the leaf's ${wrong[0]} is ${JSON.stringify(wrong[1])}, the run's is ${JSON.stringify(wrong[2])}`,
    };
  return {
    name,
    ok: true,
    reason: `run ${String(run.id)}, ${String(leaf.event_count)} events, root ${String(leaf.root_hash)}`,
  };
}

async function parsedKeys(list: readonly unknown[]): Promise<NoteVerifierKey[]> {
  const out: NoteVerifierKey[] = [];
  for (const k of list) {
    const parsed = typeof k === 'string' ? await parseNoteVerifierKey(k) : undefined;
    if (parsed && !('problem' in parsed)) out.push(parsed);
  }
  return out;
}

/** The keys a checkpoint may be signed by, and how the user came to trust them. */
async function trustedLogKeys(
  origin: string,
  bundleKeys: readonly unknown[],
  facts: RunFacts,
  options: LogCheckOptions,
): Promise<{ keys: NoteVerifierKey[]; source: string }> {
  const pinned = options.pinnedKeys ?? [];
  const logKeys = options.logKeys ?? [];
  if (pinned.length > 0 || logKeys.length > 0) {
    const fromPinned = await Promise.all(pinned.map((hex) => noteVerifierKeyOf(origin, hex)));
    return {
      keys: [...fromPinned.filter((k): k is NoteVerifierKey => k !== undefined), ...(await parsedKeys(logKeys))],
      source: 'the pinned keys',
    };
  }
  // Unpinned: the bundle's own note keys, and only those of a platform key the bundle lists.
  const own = (await parsedKeys(bundleKeys)).filter((k) => facts.bundlePlatformKeys.includes(k.public_key_hex));
  return {
    keys: own,
    source: "the bundle's own keys (not pinned: pin with --public-key, --trust-file or --log-key)",
  };
}

function absentOrPending(status: 'absent' | 'pending', reason: string, requireLog: boolean): LogCheck {
  return {
    name: 'log',
    ok: !requireLog,
    status,
    reason: requireLog ? `${reason}; required (--require-log)` : reason,
  };
}

/**
 * Checks a bundle's `verifier.log` against the run: `log_leaf` (the leaf is this run: run id,
 * subject, root hash, event count), `log_leaf_hash` (SHA-256(0x00 || JCS(leaf))),
 * `log_checkpoint_signature` (the checkpoint is signed by a trusted key) and `log_inclusion` (the
 * leaf is record `leaf_index` of the checkpoint's tree). An absent or pending entry is one `log`
 * check with that status.
 *
 * @example
 * checks.push(...(await logChecks(verifier.log, { run, eventCount, certificateRoot, bundlePlatformKeys }, {})));
 */
export async function logChecks(log: unknown, facts: RunFacts, options: LogCheckOptions): Promise<LogCheck[]> {
  const requireLog = options.requireLog === true;
  if (log === undefined)
    return [
      absentOrPending(
        'absent',
        'the bundle has no verifier.log (made before the transparency log): its run is not shown to be in the log',
        requireLog,
      ),
    ];
  if (!isObj(log)) return [{ name: 'log', ok: false, reason: 'verifier.log is not an object' }];
  if (log.status === 'pending') {
    const checks = [
      absentOrPending(
        'pending',
        'the run is not in a signed checkpoint yet: download the bundle again later for its inclusion proof',
        requireLog,
      ),
    ];
    if (log.leaf !== null && log.leaf !== undefined) checks.push(leafCheck(log.leaf, facts));
    return checks;
  }
  const checks = [leafCheck(log.leaf, facts)];

  const leafHash = isObj(log.leaf) ? await logLeafHashHex(canonicalJson(log.leaf)) : '';
  checks.push({
    name: 'log_leaf_hash',
    ok: leafHash !== '' && leafHash === log.leaf_hash,
    reason:
      leafHash === log.leaf_hash
        ? leafHash
        : `recomputed ${leafHash || '(no leaf)'}, the bundle says ${String(log.leaf_hash)}`,
  });

  const note = typeof log.checkpoint === 'string' ? log.checkpoint : '';
  const cut = note.lastIndexOf('\n\n');
  const checkpoint = parseCheckpoint(cut < 0 ? '' : note.slice(0, cut + 1));
  if ('problem' in checkpoint) {
    checks.push({ name: 'log_checkpoint_signature', ok: false, reason: checkpoint.problem });
    checks.push({ name: 'log_inclusion', ok: false, reason: 'no checkpoint to check the proof against' });
    return checks;
  }
  const bundleKeys = Array.isArray(log.verifier_keys) ? log.verifier_keys : [];
  const trusted = await trustedLogKeys(checkpoint.origin, bundleKeys, facts, options);
  const opened = await openNote(note, trusted.keys);
  const originOk = log.origin === checkpoint.origin;
  checks.push({
    name: 'log_checkpoint_signature',
    ok: !('problem' in opened) && originOk,
    reason:
      'problem' in opened
        ? `${opened.problem} among ${trusted.source}`
        : !originOk
          ? `the checkpoint is of log ${checkpoint.origin}, the bundle names ${String(log.origin)}`
          : `tree of ${checkpoint.tree_size} signed by ${opened.signed_by.map((k) => `${k.name}+${k.key_hash_hex}`).join(', ')}, among ${trusted.source}`,
  });

  const index = log.leaf_index;
  const proof = Array.isArray(log.inclusion_proof) ? log.inclusion_proof.filter((h) => typeof h === 'string') : [];
  const indexOk = typeof index === 'number' && Number.isSafeInteger(index) && index >= 0;
  const included =
    indexOk &&
    leafHash !== '' &&
    proof.length === (Array.isArray(log.inclusion_proof) ? log.inclusion_proof.length : -1) &&
    (await checkInclusion(proof, checkpoint.tree_size, checkpoint.root_hash_b64, index, leafHash));
  checks.push({
    name: 'log_inclusion',
    ok: included,
    reason: included
      ? `record ${String(index)} of ${checkpoint.tree_size}`
      : !indexOk
        ? `leaf_index ${JSON.stringify(index)} is not a record number`
        : index >= checkpoint.tree_size
          ? `record ${index} is not in the checkpoint's tree of ${checkpoint.tree_size} records`
          : `the proof does not lead from the leaf's hash, as record ${index}, to the checkpoint's root`,
  });
  return checks;
}

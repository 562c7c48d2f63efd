import { readFile, stat } from 'node:fs/promises';
import { ed25519PublicKeyHexProblem, isLowerHex } from '@svc/protocol';
import {
  parseNoteVerifierKey,
  parseStrictJson,
  STRICT_JSON_DEFAULT_MAX_BYTES,
  verifyBundle,
  type BundleCheck,
  type TrustedKey,
} from '@svc/protocol/verify';
import { parseArgs, UsageError } from './args.js';
import { VERIFY_USAGE } from './usage.js';

/** A trust file's `log.verifier_keys` (GET /api/v1/keys/platform lists them there), if any. */
function logKeysFrom(parsed: unknown): string[] {
  const log = typeof parsed === 'object' && parsed !== null && 'log' in parsed ? parsed.log : undefined;
  const keys = typeof log === 'object' && log !== null && 'verifier_keys' in log ? log.verifier_keys : undefined;
  return Array.isArray(keys) ? keys.filter((k): k is string => typeof k === 'string') : [];
}

function trustedKeysFrom(text: string, file: string): { keys: TrustedKey[]; logKeys: string[] } {
  let parsed: unknown;
  try {
    parsed = parseStrictJson(text, { maxBytes: 1024 * 1024 });
  } catch (err) {
    throw new UsageError(`--trust-file ${file}: ${err instanceof Error ? err.message : String(err)}`);
  }
  const list: unknown = Array.isArray(parsed)
    ? parsed
    : typeof parsed === 'object' && parsed !== null && 'keys' in parsed
      ? parsed.keys
      : undefined;
  if (!Array.isArray(list) || list.length === 0)
    throw new UsageError(`--trust-file ${file}: expected {"keys": [...]} or a non-empty array of keys`);
  const keys = list.map((k: unknown, i) => {
    const key = typeof k === 'string' ? { public_key_hex: k } : (k as Record<string, unknown>);
    if (typeof key !== 'object' || key === null || !isLowerHex(key.public_key_hex, 32))
      throw new UsageError(`--trust-file ${file}: key ${i} has no 64-hex-character public_key_hex`);
    const problem = ed25519PublicKeyHexProblem(String(key.public_key_hex));
    if (problem) throw new UsageError(`--trust-file ${file}: key ${i} ${problem}`);
    const when = (v: unknown, name: string) => {
      if (v === undefined || v === null) return null;
      if (typeof v !== 'string' || Number.isNaN(Date.parse(v)))
        throw new UsageError(`--trust-file ${file}: key ${i} has an invalid ${name}`);
      return v;
    };
    return {
      public_key_hex: String(key.public_key_hex),
      key_id: typeof key.key_id === 'string' ? key.key_id : undefined,
      valid_from: when(key.valid_from, 'valid_from'),
      valid_until: when(key.valid_until, 'valid_until'),
    };
  });
  return { keys, logKeys: logKeysFrom(parsed) };
}

/** A check's label: PASS or FAIL, or ABSENT / PENDING for a log entry that is not there yet. */
function label(c: BundleCheck): string {
  return c.status ? c.status.toUpperCase() : c.ok ? 'PASS' : 'FAIL';
}

async function readInput(path: string, maxBytes: number): Promise<string> {
  if (path === '-') {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of process.stdin) {
      size += (chunk as Buffer).length;
      if (size > maxBytes) throw new UsageError(`standard input is larger than ${maxBytes} bytes`);
      chunks.push(chunk as Buffer);
    }
    return Buffer.concat(chunks).toString('utf8');
  }
  try {
    // Refuse oversized files before reading them into memory.
    if ((await stat(path)).size > maxBytes)
      throw new UsageError(`${path} is larger than ${maxBytes} bytes (--max-bytes)`);
    return await readFile(path, 'utf8');
  } catch (err) {
    if (err instanceof UsageError) throw err;
    throw new UsageError(`cannot read ${path}: ${err instanceof Error ? err.message : String(err)}`);
  }
}

/** `svc verify`: exit 0 when every check passes, 1 when one fails, 2 on bad usage. */
export async function verify(argv: string[]): Promise<number> {
  const args = parseArgs(argv, {
    values: ['public-key', 'trust-file', 'max-bytes', 'log-key'],
    booleans: ['json', 'require-log'],
  });
  const [path, ...extra] = args.positionals;
  if (!path || extra.length > 0) throw new UsageError(`expected one bundle file\n\n${VERIFY_USAGE}`);
  const rawMax = args.flags['max-bytes'];
  const maxBytes = typeof rawMax === 'string' ? Number(rawMax) : STRICT_JSON_DEFAULT_MAX_BYTES;
  if (!Number.isSafeInteger(maxBytes) || maxBytes < 1)
    throw new UsageError(`--max-bytes must be a positive whole number, got '${String(rawMax)}'`);
  const pinned: TrustedKey[] = [];
  for (const hex of args.multi['public-key'] ?? []) {
    if (!isLowerHex(hex, 32)) throw new UsageError(`--public-key must be 64 lowercase hex characters, got '${hex}'`);
    const problem = ed25519PublicKeyHexProblem(hex);
    if (problem) throw new UsageError(`--public-key ${hex} ${problem}`);
    pinned.push({ public_key_hex: hex });
  }
  const logKeys: string[] = [];
  for (const vkey of args.multi['log-key'] ?? []) {
    const parsed = await parseNoteVerifierKey(vkey);
    if ('problem' in parsed) throw new UsageError(`--log-key ${vkey}: ${parsed.problem}`);
    logKeys.push(vkey);
  }
  const trustFile = args.flags['trust-file'];
  if (typeof trustFile === 'string') {
    const trust = trustedKeysFrom(await readInput(trustFile, 1024 * 1024), trustFile);
    pinned.push(...trust.keys);
    logKeys.push(...trust.logKeys);
  }

  const text = await readInput(path, maxBytes);
  const result = await verifyBundle(text, {
    maxBytes,
    requireLog: args.flags['require-log'] === true,
    ...(pinned.length > 0 ? { trustedKeys: pinned } : {}),
    ...(logKeys.length > 0 ? { trustedLogKeys: logKeys } : {}),
  });
  if (args.flags.json === true) {
    process.stdout.write(
      `${JSON.stringify({ ok: result.ok, file: path, pinned_keys: pinned.length, checks: result.checks }, null, 2)}\n`,
    );
  } else {
    for (const c of result.checks) process.stdout.write(`${label(c)}  ${c.name}  ${c.reason}\n`);
    const failed = result.checks.filter((c) => !c.ok).length;
    const log = result.checks.find((c) => c.status !== undefined);
    process.stdout.write(
      !result.ok
        ? `\nNOT VERIFIED: ${failed} of ${result.checks.length} checks failed\n`
        : log
          ? `\nverified: ${result.checks.length - 1} checks passed; the log entry is ${String(log.status)}, so the run is not shown to be in the log (--require-log fails this)\n`
          : `\nverified: all ${result.checks.length} checks passed\n`,
    );
  }
  return result.ok ? 0 : 1;
}

import { readFile, stat } from 'node:fs/promises';
import { ed25519PublicKeyHexProblem, isLowerHex } from '@svc/protocol';
import { parseStrictJson, STRICT_JSON_DEFAULT_MAX_BYTES, verifyBundle, type TrustedKey } from '@svc/protocol/verify';
import { parseArgs, UsageError } from './args.js';
import { VERIFY_USAGE } from './usage.js';

function trustedKeysFrom(text: string, file: string): TrustedKey[] {
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
  return list.map((k: unknown, i) => {
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
  const args = parseArgs(argv, { values: ['public-key', 'trust-file', 'max-bytes'], booleans: ['json'] });
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
  const trustFile = args.flags['trust-file'];
  if (typeof trustFile === 'string')
    pinned.push(...trustedKeysFrom(await readInput(trustFile, 1024 * 1024), trustFile));

  const text = await readInput(path, maxBytes);
  const result = await verifyBundle(text, { maxBytes, ...(pinned.length > 0 ? { trustedKeys: pinned } : {}) });
  if (args.flags.json === true) {
    process.stdout.write(
      `${JSON.stringify({ ok: result.ok, file: path, pinned_keys: pinned.length, checks: result.checks }, null, 2)}\n`,
    );
  } else {
    for (const c of result.checks) process.stdout.write(`${c.ok ? 'PASS' : 'FAIL'}  ${c.name}  ${c.reason}\n`);
    const failed = result.checks.filter((c) => !c.ok).length;
    process.stdout.write(
      result.ok
        ? `\nverified: all ${result.checks.length} checks passed\n`
        : `\nNOT VERIFIED: ${failed} of ${result.checks.length} checks failed\n`,
    );
  }
  return result.ok ? 0 : 1;
}

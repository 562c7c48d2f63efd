import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { isLowerHex, verifyHex } from '@svc/protocol';
import { parseArgs, UsageError } from './args.js';
import { serverUrl } from './server-info.js';

/** What a download is checked against: its SHA-256, and the platform's signature over its bytes. */
export interface DownloadClaim {
  sha256: string;
  signatureHex: string;
  publicKeyHex: string;
}

/**
 * Whether `bytes` are the download the claim describes: SHA-256 equal, and the Ed25519 signature
 * (pure, RFC 8032) by the platform key valid over exactly these bytes. One line per check.
 *
 * @example
 * checkDownload(await readFile('svc-0.1.0.tgz'), claim); // { ok: true, lines: ['ok   sha256 ...', 'ok   signature ...'] }
 */
export function checkDownload(bytes: Uint8Array, claim: DownloadClaim): { ok: boolean; lines: string[] } {
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  const hashOk = sha256 === claim.sha256;
  const signatureOk = verifyHex(bytes, claim.signatureHex, claim.publicKeyHex);
  return {
    ok: hashOk && signatureOk,
    lines: [
      `${hashOk ? 'ok  ' : 'FAIL'} sha256     ${sha256}${hashOk ? '' : ` (expected ${claim.sha256})`}`,
      `${signatureOk ? 'ok  ' : 'FAIL'} signature  Ed25519 by platform key ${claim.publicKeyHex.slice(0, 16)}... over the file's ${bytes.length} bytes`,
    ],
  };
}

async function getJson(url: string): Promise<Record<string, unknown>> {
  const res = await fetch(url, { signal: AbortSignal.timeout(15_000) });
  if (!res.ok) throw new Error(`${url} answered ${res.status}`);
  return (await res.json()) as Record<string, unknown>;
}

/** The claim for the agent tarball as `server` lists it, its key taken from the server's platform keys. */
async function claimFromServer(server: string): Promise<DownloadClaim> {
  const listing = await getJson(serverUrl(server, '/api/v1/downloads'));
  const agent = (listing.agent ?? {}) as {
    status?: string;
    reason?: string;
    sha256?: string;
    signature?: Record<string, unknown>;
  };
  if (agent.status !== 'ready' || agent.sha256 === undefined || agent.signature === undefined)
    throw new Error(`the server lists no agent tarball: ${agent.reason ?? agent.status ?? 'no agent entry'}`);
  const keys = (await getJson(serverUrl(server, '/api/v1/keys/platform'))).keys as {
    key_id: string;
    public_key_hex: string;
  }[];
  const key = keys.find((k) => k.key_id === agent.signature?.key_id);
  if (key === undefined)
    throw new Error(`the signature's key ${String(agent.signature.key_id)} is not among the server's platform keys`);
  return {
    sha256: agent.sha256,
    signatureHex: String(agent.signature.signature_hex),
    publicKeyHex: key.public_key_hex,
  };
}

/**
 * `svc verify-download FILE`: exit 0 when the file's hash and platform signature match, 1 when not,
 * 2 on bad usage or an unreadable file.
 *
 * @example
 * process.exitCode = await verifyDownload(['svc-0.1.0.tgz', '--server', 'https://svc.example']);
 */
export async function verifyDownload(argv: string[]): Promise<number> {
  const args = parseArgs(argv, { values: ['server', 'sha256', 'signature', 'public-key'], booleans: [] });
  const [file, extra] = args.positionals;
  if (file === undefined || extra !== undefined) throw new UsageError('give one FILE.tgz to check');
  const flag = (name: string) => (typeof args.flags[name] === 'string' ? args.flags[name] : undefined);
  const server = flag('server');
  const given = { sha256: flag('sha256'), signatureHex: flag('signature'), publicKeyHex: flag('public-key') };
  if ((server === undefined) === (given.sha256 === undefined))
    throw new UsageError('give either --server URL or --sha256, --signature and --public-key');
  let claim: DownloadClaim;
  if (server !== undefined) claim = await claimFromServer(server);
  else {
    const { sha256 = '', signatureHex = '', publicKeyHex = '' } = given;
    if (!isLowerHex(sha256, 32) || !isLowerHex(signatureHex, 64) || !isLowerHex(publicKeyHex, 32))
      throw new UsageError('--sha256 (64), --signature (128) and --public-key (64) are lower-case hex');
    claim = { sha256, signatureHex, publicKeyHex };
  }
  let bytes: Buffer;
  try {
    bytes = await readFile(file);
  } catch (err) {
    throw new UsageError(`cannot read ${file}: ${err instanceof Error ? err.message : String(err)}`);
  }
  const result = checkDownload(bytes, claim);
  process.stdout.write(`${result.lines.join('\n')}\n`);
  return result.ok ? 0 : 1;
}

import { spawn } from 'node:child_process';
import { createHash, sign } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { PlatformServices } from '../../platform/services.js';
import { SERVICE_VERSION } from '../../platform/version.js';

/** scripts/pack-agent.mjs, which builds the tarball (esbuild + npm pack) unless it is up to date. */
const PACK_SCRIPT = fileURLToPath(new URL('../../../../../scripts/pack-agent.mjs', import.meta.url));
/** Where the root `prepare` (npm install) and `svc serve` put the tarball: never checked in. */
export const AGENT_DOWNLOADS_DIR = fileURLToPath(
  new URL('../../../../../node_modules/.cache/svc-agent', import.meta.url),
);
/** The file name the tarball is served under: `svc-<version>.tgz`, this server's version. */
export const AGENT_FILE = `svc-${SERVICE_VERSION}.tgz`;

/** What the listing says of the signed bytes, for whoever verifies them. */
export const SIGNED_BYTES =
  'the exact bytes of the file served at url (pure Ed25519, RFC 8032, no pre-hash), by the platform key key_id of GET /api/v1/keys/platform';

/** The tarball as served: its bytes are what is hashed and signed. */
interface Artifact {
  bytes: Buffer;
  sha256: string;
  mtimeMs: number;
}

type BuildState = { status: 'idle' } | { status: 'building' } | { status: 'failed'; reason: string };

interface AgentDownloads {
  dir: string;
  build: BuildState;
  artifact?: Artifact;
  /** The signature of `artifact` by the key that made it (a rotation signs again). */
  signature?: { sha256: string; keyId: string; hex: string };
}

/** A deliberate cache: one tarball state per running server. */
const downloadsOf = new WeakMap<PlatformServices, AgentDownloads>();

function stateOf(ctx: PlatformServices): AgentDownloads {
  let state = downloadsOf.get(ctx);
  if (!state) {
    state = { dir: AGENT_DOWNLOADS_DIR, build: { status: 'idle' } };
    downloadsOf.set(ctx, state);
  }
  return state;
}

/**
 * Points this server's agent download at `dir` instead of node_modules/.cache/svc-agent (tests).
 *
 * @example
 * useAgentDownloadsDir(t.ctx, tmp);
 */
export function useAgentDownloadsDir(ctx: PlatformServices, dir: string): void {
  const state = stateOf(ctx);
  state.dir = dir;
  delete state.artifact;
  delete state.signature;
}

/**
 * Builds the tarball when it is missing or older than the sources (scripts/pack-agent.mjs, in a
 * child process), while the server already answers: until it is ready the listing says `building`,
 * and if the build fails, why. Resolves when the build ends; never rejects.
 *
 * @example
 * void buildAgentDownload(server.ctx); // at `svc serve` start
 */
export function buildAgentDownload(ctx: PlatformServices): Promise<void> {
  const state = stateOf(ctx);
  state.build = { status: 'building' };
  return new Promise((resolveBuild) => {
    const child = spawn(process.execPath, [PACK_SCRIPT, '--out', state.dir], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stdout.on('error', () => undefined).resume();
    child.stderr
      .on('error', () => undefined)
      .on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-2000)));
    const done = (reason: string | undefined) => {
      state.build = reason === undefined ? { status: 'idle' } : { status: 'failed', reason };
      if (reason === undefined) ctx.log.info({ dir: state.dir, file: AGENT_FILE }, 'node agent tarball ready');
      else ctx.log.warn({ reason }, 'node agent tarball not built');
      resolveBuild();
    };
    child.on('error', (err) => done(`cannot run ${PACK_SCRIPT}: ${err.message}`));
    child.on('close', (code) =>
      done(code === 0 ? undefined : stderr.trim().replace(/^pack-agent: /, '') || `pack-agent exited with ${code}`),
    );
  });
}

/** The tarball's bytes as they are on disk now (re-read when the file changed), or undefined. */
async function currentArtifact(state: AgentDownloads): Promise<Artifact | undefined> {
  const path = join(state.dir, AGENT_FILE);
  const info = await stat(path).catch(() => undefined);
  if (!info) return undefined;
  if (state.artifact?.mtimeMs === info.mtimeMs && state.artifact.bytes.length === info.size) return state.artifact;
  const bytes = await readFile(path).catch(() => undefined);
  if (!bytes) return undefined;
  state.artifact = { bytes, sha256: createHash('sha256').update(bytes).digest('hex'), mtimeMs: info.mtimeMs };
  return state.artifact;
}

/**
 * The agent tarball's bytes when `file` names it and it is built, else undefined: what
 * `GET /api/v1/downloads/{file}` sends, the same bytes the listing hashes and signs.
 *
 * @example
 * const bytes = await agentTarball(ctx, 'svc-0.1.0.tgz');
 */
export async function agentTarball(ctx: PlatformServices, file: string): Promise<Buffer | undefined> {
  if (file !== AGENT_FILE) return undefined;
  return (await currentArtifact(stateOf(ctx)))?.bytes;
}

/** Why there is no tarball to serve, in words for the listing and the 404. */
export function agentUnavailableReason(ctx: PlatformServices): string {
  const { build, dir } = stateOf(ctx);
  if (build.status === 'building') return `${AGENT_FILE} is being built; try again in a few seconds`;
  if (build.status === 'failed') return `${AGENT_FILE} could not be built: ${build.reason}`;
  return `${AGENT_FILE} is not built in ${dir}: run npm install (or node scripts/pack-agent.mjs) and restart svc serve`;
}

/**
 * The agent entry of `GET /api/v1/downloads`: where to get the tarball, its SHA-256, and the
 * platform key's Ed25519 signature over its bytes; or, before it exists, why not.
 *
 * @example
 * const agent = await agentListing(ctx); // { status: 'ready', url, sha256, signature: {...}, ... }
 */
export async function agentListing(ctx: PlatformServices) {
  const state = stateOf(ctx);
  const url = `${ctx.config.publicUrl}/api/v1/downloads/${AGENT_FILE}`;
  const verify = `svc verify-download ${AGENT_FILE} --server ${ctx.config.publicUrl}`;
  const artifact = await currentArtifact(state);
  if (!artifact) {
    return {
      status: state.build.status === 'building' ? ('building' as const) : ('unavailable' as const),
      file: AGENT_FILE,
      url,
      reason: agentUnavailableReason(ctx),
    };
  }
  const key = ctx.secrets.active;
  if (state.signature?.sha256 !== artifact.sha256 || state.signature.keyId !== key.key_id)
    state.signature = {
      sha256: artifact.sha256,
      keyId: key.key_id,
      hex: sign(null, artifact.bytes, key.privateKey).toString('hex'),
    };
  return {
    status: 'ready' as const,
    file: AGENT_FILE,
    url,
    size_bytes: artifact.bytes.length,
    sha256: artifact.sha256,
    signature: {
      algorithm: 'ed25519' as const,
      key_id: key.key_id,
      public_key_hex: key.public_key_hex,
      signature_hex: state.signature.hex,
      signed_bytes: SIGNED_BYTES,
    },
    verify,
  };
}

/**
 * `GET /api/v1/downloads`: the agent's version, platforms, the commands that install and start it
 * on a machine with only Node.js and npm, and the tarball's entry ({@link agentListing}).
 *
 * @example
 * const { install_commands } = await downloadsInfo(ctx);
 */
export async function downloadsInfo(ctx: PlatformServices) {
  const agent = await agentListing(ctx);
  const engines = ['openai-upstream', 'llama-cpp', 'process'];
  const platform = { runtime: 'node>=20.10 with npm', engines };
  const commands = [
    `npm install -g ${agent.url}`,
    `svc node --server ${ctx.config.publicUrl} --api-key <OPERATOR_API_KEY>`,
  ].join('\n');
  return {
    version: SERVICE_VERSION,
    platforms: { 'linux-x64': platform, 'linux-arm64': platform, 'darwin-arm64': platform },
    install_commands: { 'linux-x64': commands, 'linux-arm64': commands, 'darwin-arm64': commands },
    agent,
  };
}

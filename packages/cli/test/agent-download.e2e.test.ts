import { execFile, execFileSync, spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { detectOciRunner } from '@svc/node-agent';
import { verifyHex } from '@svc/protocol';
import { createTestStore, type TestStore } from '@svc/server/testing';
import { buildBusyboxArchive, podman, safe } from './busybox-image.js';
import { spawnSvc, until, waitForUrl, type SpawnedSvc } from './spawn.js';

// npm test: one store: the subject is the agent tarball (its signature, an npm install of it, the
// installed agent running a job); the store side of a job runs on both stores in packages/server.

const VERSION = (
  JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string }
).version;

interface AgentEntry {
  status: string;
  url: string;
  sha256?: string;
  reason?: string;
  signature?: { key_id: string; public_key_hex: string; signature_hex: string; signed_bytes: string };
}

/**
 * The environment of a process on a machine with no clone: this one's (proxies, CA certificates)
 * without what npm test, vitest and svc set (npm_* names the repository as the project).
 */
function cleanEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(
    Object.entries(process.env).filter(([name]) => !/^(npm_|NODE_OPTIONS$|VITEST|SVC_|INIT_CWD$|TEST$)/i.test(name)),
  );
}

/** The installed node runs the job in a container (the oci runner) where podman works here, else with the process runner. */
const oci =
  (await detectOciRunner()).available && safe(() => execFileSync('/bin/busybox', ['--help']).toString()) !== '';

function npmReachable(): boolean {
  return spawnSync('npm', ['ping'], { timeout: 20_000, encoding: 'utf8', env: cleanEnv() }).status === 0;
}

describe('the node agent as a signed tarball that svc serve serves (real processes)', () => {
  let store: TestStore;
  let server: SpawnedSvc;
  let base: string;
  let agent: AgentEntry;
  const scratch = mkdtempSync(join(tmpdir(), 'svc-agent-install-'));

  beforeAll(async () => {
    store = await createTestStore();
    server = spawnSvc(['serve', '--port', '0'], {
      SVC_DATA_DIR: store.dataDir,
      SVC_LOG_LEVEL: 'warn',
      ...(store.databaseUrl ? { DATABASE_URL: store.databaseUrl } : {}),
    });
    base = await waitForUrl(server);
    // svc serve builds the tarball at start when it is missing or stale, without waiting for it.
    agent = await until(
      'the agent tarball listed as ready',
      async () => {
        const listing = (await (await fetch(`${base}/api/v1/downloads`)).json()) as { agent: AgentEntry };
        if (listing.agent.status === 'unavailable') throw new Error(listing.agent.reason);
        return listing.agent.status === 'ready' ? listing.agent : undefined;
      },
      120_000,
    );
  }, 150_000);

  afterAll(async () => {
    server.child.kill('SIGTERM');
    await server.exited;
    await store.drop();
    rmSync(scratch, { recursive: true, force: true });
  });

  it('lists the tarball with its SHA-256 and a platform-key signature that verifies over the served bytes; a changed byte fails', async () => {
    expect(agent.url).toBe(`${base}/api/v1/downloads/svc-${VERSION}.tgz`);
    const bytes = Buffer.from(await (await fetch(agent.url)).arrayBuffer());
    expect(bytes.subarray(0, 2)).toEqual(Buffer.from([0x1f, 0x8b])); // gzip
    expect(createHash('sha256').update(bytes).digest('hex')).toBe(agent.sha256);
    const keys = (await (await fetch(`${base}/api/v1/keys/platform`)).json()) as {
      keys: { key_id: string; public_key_hex: string }[];
    };
    const key = keys.keys.find((k) => k.key_id === agent.signature?.key_id);
    expect(key?.public_key_hex).toBe(agent.signature?.public_key_hex);
    expect(verifyHex(bytes, agent.signature?.signature_hex ?? '', key?.public_key_hex ?? '')).toBe(true);
    const changed = Buffer.from(bytes);
    changed[changed.length >> 1] = (changed[changed.length >> 1] ?? 0) ^ 1;
    expect(verifyHex(changed, agent.signature?.signature_hex ?? '', key?.public_key_hex ?? '')).toBe(false);

    // svc verify-download does the same checks against the server's listing and keys.
    const good = join(scratch, `svc-${VERSION}.tgz`);
    const bad = join(scratch, 'changed.tgz');
    writeFileSync(good, bytes);
    writeFileSync(bad, changed);
    const ok = spawnSvc(['verify-download', good, '--server', base]);
    expect(await ok.exited).toBe(0);
    expect(ok.stdout()).toMatch(/^ok {3}sha256 /m);
    expect(ok.stdout()).toMatch(/^ok {3}signature /m);
    const refused = spawnSvc(['verify-download', bad, '--server', base]);
    expect(await refused.exited).toBe(1);
    expect(refused.stdout()).toMatch(/^FAIL signature /m);
    // Anything else under /api/v1/downloads/ is a 404, never a file of the server's.
    expect((await fetch(`${base}/api/v1/downloads/..%2F..%2Fpackage.json`)).status).toBe(404);
  }, 60_000);

  it('installs with npm install -g from the listed URL where there is no clone; the installed svc prints its version, registers and completes a kind 5 job', async (context) => {
    if (!npmReachable()) {
      process.stdout.write(
        '[svc test] SKIPPED the agent install test: the npm registry is unreachable (npm ping failed)\n',
      );
      context.skip();
    }
    const prefix = join(scratch, 'prefix');
    writeFileSync(join(scratch, 'README'), 'no clone here\n');
    const install = await new Promise<{ code: number | null; out: string }>((resolve) =>
      execFile(
        'npm',
        ['install', '-g', '--prefix', prefix, '--no-audit', '--no-fund', agent.url],
        { cwd: scratch, env: cleanEnv(), timeout: 240_000, encoding: 'utf8' },
        (err, stdout, stderr) => resolve({ code: err ? 1 : 0, out: `${stdout}${stderr}` }),
      ),
    );
    expect(install.out).not.toMatch(/ERR!/);
    expect(install.code).toBe(0);
    const svc = join(prefix, 'bin', 'svc');
    expect(spawnSync(svc, ['--version'], { cwd: scratch, env: cleanEnv(), encoding: 'utf8' }).stdout).toBe(
      `${VERSION}\n`,
    );
    expect(spawnSync(svc, ['node', '--version'], { cwd: scratch, env: cleanEnv(), encoding: 'utf8' }).stdout).toBe(
      `${VERSION}\n`,
    );

    const signup = (await (
      await fetch(`${base}/api/v1/auth/signup`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: 'installed@e2e.test', password: 'end to end password' }),
      })
    ).json()) as { api_key: string; token: string };
    const post = async (path: string, body: unknown, key: string) =>
      (await (
        await fetch(`${base}${path}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify(body),
        })
      ).json()) as Record<string, unknown>;
    const operatorKey = String(
      (await post('/api/v1/auth/api-keys', { label: 'installed node', scopes: ['operator'] }, signup.token)).api_key,
    );
    const image = `localhost/svc-agent-install-busybox:${process.pid}`;
    const runner = oci ? ['--image', buildBusyboxArchive(scratch, image)] : ['--allow-process-runner'];
    process.stdout.write(
      `[svc test] the installed agent runs the kind 5 job with ${oci ? 'the oci runner (podman)' : 'the process runner (no podman here)'}\n`,
    );
    const node = spawn(
      svc,
      ['node', '--server', base, '--api-key', operatorKey, '--data-dir', join(scratch, 'node-data'), ...runner],
      { cwd: scratch, env: cleanEnv(), stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    let err = '';
    node.stdout.on('data', (d: Buffer) => (out += d.toString()));
    node.stderr.on('data', (d: Buffer) => (err += d.toString()));
    try {
      await until('the installed node registering', async () => (/registered node_/.test(out) ? true : undefined));
      const job = await post(
        '/api/v1/marketplace/jobs',
        {
          kind: 5,
          budget: 0.5,
          max_price_per_unit: 0.0001,
          currency: 'CAD',
          runner_args: oci
            ? ['sh', '-c', 'echo ran on the installed agent']
            : [process.execPath, '-e', 'console.log("ran on the installed agent")'],
          timeout_seconds: 60,
        },
        signup.api_key,
      );
      const jobUrl = `${base}/api/v1/marketplace/jobs/${String(job.job_id)}`;
      const headers = { authorization: `Bearer ${signup.api_key}` };
      await until('the job completing', async () => {
        const body = (await (await fetch(jobUrl, { headers })).json()) as { status: string };
        return body.status === 'completed' ? true : undefined;
      });
      const result = await (await fetch(`${jobUrl}/result`, { headers })).text();
      expect(result).toContain('ran on the installed agent');
      if (oci) expect(JSON.parse(result)).toMatchObject({ runner: 'oci', image });
      // Same version on both sides: no warning.
      expect(err).not.toContain('newer than this agent');
    } finally {
      node.kill('SIGKILL');
      if (oci) safe(() => podman('rmi', '-f', image));
    }
  }, 300_000);
});

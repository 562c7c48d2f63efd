import { createServer, type Server } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestStore, type TestStore } from '@svc/server/testing';
import { doctorChecks, type PodmanProbe } from '../src/doctor.js';
import { runDoctor } from '../src/doctor-report.js';
import { newerServerWarning } from '../src/node-command.js';
import { SVC_VERSION } from '../src/version.js';
import { spawnSvc, until, waitForUrl, type SpawnedSvc } from './spawn.js';

// npm test: one store: the subject is `svc node doctor`'s checks over HTTP; what they read (health, the clock's Date
// header) runs on both stores in packages/server/src/modules/system/system.test.ts.

const NAMES = ['node', 'server', 'clock', 'podman', 'images', 'gpu', 'engine'];
const podman = async (): Promise<PodmanProbe> => ({
  available: true,
  rootless: true,
  podmanVersion: '4.3.1',
  reasons: [],
});
const exec = async () => ({ ok: true, out: 'docker.io/library/alpine:3' });

async function doctorLines(options: Parameters<typeof doctorChecks>[0]): Promise<{ code: number; lines: string[] }> {
  const lines: string[] = [];
  const code = await runDoctor(doctorChecks(options), (line) => lines.push(line));
  return { code, lines };
}

describe('svc node doctor against a real svc serve', () => {
  let store: TestStore;
  let server: SpawnedSvc;
  let base: string;
  beforeAll(async () => {
    store = await createTestStore();
    server = spawnSvc(['serve', '--port', '0'], {
      SVC_DATA_DIR: store.dataDir,
      SVC_LOG_LEVEL: 'warn',
      ...(store.databaseUrl ? { DATABASE_URL: store.databaseUrl } : {}),
    });
    base = await waitForUrl(server);
  });
  afterAll(async () => {
    server.child.kill('SIGTERM');
    await server.exited;
    await store.drop();
  });

  it('prints one line per check and exits 0 when the required ones pass (a reachable server, a synchronised clock)', async () => {
    const run = spawnSvc(['node', 'doctor', '--server', base]);
    expect(await run.exited).toBe(0);
    const lines = run.stdout().trim().split('\n');
    expect(lines.map((l) => l.slice(5).split(' ')[0])).toEqual(NAMES);
    expect(lines[1]).toMatch(new RegExp(`^ok {3}server {3}${base} answers \\(svc ${SVC_VERSION}, \\d+ ms\\)$`));
    expect(lines[2]).toMatch(/^ok {3}clock {4}\d+\.\d s (behind|ahead of) the server/);
    expect(lines[6]).toBe('skip engine   no engine named (give --upstream or --gguf to check one)');
  }, 60_000);

  it('an unreachable server fails with the fix, exit 1', async () => {
    const run = spawnSvc(['node', 'doctor', '--server', 'http://127.0.0.1:9']);
    expect(await run.exited).toBe(1);
    const server = run
      .stdout()
      .split('\n')
      .find((l) => l.includes(' server '));
    expect(server).toMatch(
      /^FAIL server {3}no answer from http:\/\/127\.0\.0\.1:9 \(.+\); fix: check --server, that svc serve runs there/,
    );
  }, 60_000);

  it('a clock 2 minutes off fails (signed calls refused past 60 s), 20 s off warns with the fix, both against the same server', async () => {
    const far = await doctorLines({
      server: base,
      gguf: false,
      now: () => Date.now() - 120_000,
      probePodman: podman,
      exec,
    });
    expect(far.code).toBe(1);
    const farClock = far.lines.find((l) => l.includes(' clock '));
    expect(farClock).toMatch(
      /^FAIL clock {4}1(19|20|21)\.\d s behind the server \(±1 s\): signed node calls are refused past 60 s; fix: turn on time synchronisation/,
    );
    const near = await doctorLines({
      server: base,
      gguf: false,
      now: () => Date.now() + 20_000,
      probePodman: podman,
      exec,
    });
    expect(near.code).toBe(0);
    expect(near.lines.find((l) => l.includes(' clock '))).toMatch(
      /^warn clock {4}(19|20|21)\.\d s ahead of the server \(±1 s\); fix: /,
    );
  }, 60_000);

  it('optional checks that fail warn with their fix and leave the exit code 0; a named engine that does not answer fails', async () => {
    const noPodman = async (): Promise<PodmanProbe> => ({
      available: false,
      rootless: false,
      reasons: ['podman info failed: not found'],
    });
    const bare = await doctorLines({
      server: base,
      gguf: false,
      probePodman: noPodman,
      exec: async () => ({ ok: false, out: '' }),
    });
    expect(bare.code).toBe(0);
    expect(bare.lines[3]).toBe(
      'warn podman   no usable podman: podman info failed: not found; fix: install podman (apt install podman) and run the agent as an unprivileged user (containers are then off)',
    );
    const engine = await doctorLines({
      server: base,
      upstream: 'http://127.0.0.1:9/v1',
      gguf: false,
      probePodman: podman,
      exec,
    });
    expect(engine.code).toBe(1);
    expect(engine.lines[6]).toMatch(
      /^FAIL engine {3}http:\/\/127\.0\.0\.1:9\/v1\/models did not answer; fix: start the engine/,
    );
  }, 60_000);
});

describe('the agent warns when the server runs a newer svc', () => {
  let stub: Server;
  let url: string;
  const dir = mkdtempSync(join(tmpdir(), 'svc-newer-'));
  beforeAll(async () => {
    // A server that says it is 99.0.0 and refuses registration for now (the agent keeps retrying).
    stub = createServer((req, res) => {
      const health = req.url === '/api/v1/health';
      res.writeHead(health ? 200 : 503, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify(
          health ? { ok: true, version: '99.0.0' } : { code: 503, error: 'no_capacity', message: 'later' },
        ),
      );
    });
    await new Promise<void>((r) => stub.listen(0, '127.0.0.1', r));
    const address = stub.address();
    url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  });
  afterAll(async () => {
    await new Promise((r) => stub.close(r));
    rmSync(dir, { recursive: true, force: true });
  });

  it('one stderr line naming both versions and the tarball to install', async () => {
    const node = spawnSvc(['node', '--server', url, '--api-key', 'k', '--allow-process-runner', '--data-dir', dir]);
    try {
      await until(
        'the warning',
        async () => (node.stderr().includes('newer than this agent') ? true : undefined),
        30_000,
      );
      await new Promise((r) => setTimeout(r, 500));
      const lines = node
        .stderr()
        .split('\n')
        .filter((l) => l.includes('newer than this agent'));
      expect(lines).toEqual([
        `svc node: warning: the server runs svc 99.0.0, newer than this agent (${SVC_VERSION}): update with npm install -g ${url}/api/v1/downloads/svc-99.0.0.tgz`,
      ]);
    } finally {
      node.child.kill('SIGKILL');
      await node.exited;
    }
  }, 60_000);

  it('says nothing for the same, an older or an unknown version', () => {
    expect(newerServerWarning('https://s.example', SVC_VERSION, SVC_VERSION)).toBeUndefined();
    expect(newerServerWarning('https://s.example', '0.0.1', '0.1.0')).toBeUndefined();
    expect(newerServerWarning('https://s.example', undefined, '0.1.0')).toBeUndefined();
    expect(newerServerWarning('https://s.example/prefix', '0.10.0', '0.9.3')).toBe(
      'svc node: warning: the server runs svc 0.10.0, newer than this agent (0.9.3): update with npm install -g https://s.example/prefix/api/v1/downloads/svc-0.10.0.tgz',
    );
  });
});

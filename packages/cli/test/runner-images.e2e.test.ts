import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Upload } from 'tus-js-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { detectOciRunner } from '@svc/node-agent';
import { createTestStore, type TestStore } from '@svc/server/testing';
import { importRunnerImage, podman, safe } from './busybox-image.js';
import { seedRepository, startFakeGitHub, startGitHost, type FakeGitHub, type GitHost } from './git-server.js';
import { spawnSvc, until, waitForUrl, type SpawnedSvc } from './spawn.js';

// npm test: one store: the subject is the platform's runner image and the containers it runs (as
// oci-runner.e2e); the store side of jobs and work orders runs on both stores in packages/server.

/**
 * Issue 42 point 2, the rest of buyer code in the oci runner, through real `svc serve` and `svc
 * node` and podman: a kind 10 program and a kind 9 capsule (with its checks) in containers of the
 * platform's default_runner_image (the node loaded no image of its own and has no process runner),
 * a kind 5 job's network only when granted, and the evidence naming runner and image.
 */

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

const CAPSULE = fileURLToPath(new URL('./fixtures/test-capsule.mjs', import.meta.url));
const TOKEN = `ghp_runnerImages${Date.now()}`;
/** The kind 10 program: the inputs' paths, sizes and hashes, and what it can see of the host. */
const PROGRAM = `
const fs = require('node:fs'), path = require('node:path'), crypto = require('node:crypto');
const [input, output] = process.argv.slice(-2);
const files = fs.readdirSync(input).sort().map((name) => {
  const bytes = fs.readFileSync(path.join(input, name));
  return { path: name, bytes: bytes.length, sha256: crypto.createHash('sha256').update(bytes).digest('hex') };
});
let inputWritable = true;
try { fs.writeFileSync(path.join(input, 'x'), 'x'); } catch { inputWritable = false; }
fs.writeFileSync(path.join(output, 'summary.json'), JSON.stringify({ files }));
// What the program saw, as file names (the test reads the outputs' paths).
if (!inputWritable) fs.writeFileSync(path.join(output, 'input-read-only'), '');
if (input === '/input' && output === '/output') fs.writeFileSync(path.join(output, 'at-input-output'), '');
`;

const probe = await detectOciRunner();
const skip = !probe.available || !/busybox/.test(safe(() => execFileSync('/bin/busybox', ['--help']).toString()));
if (skip) console.log(`runner-images.e2e: skipped: podman cannot run containers here (${probe.reasons.join('; ')})`);

/** An address of this host other than loopback: a granted container reaches it through slirp4netns' NAT. */
const hostAddress = Object.values(networkInterfaces())
  .flat()
  .find((a) => a?.family === 'IPv4' && !a.internal)?.address;

describe.skipIf(skip || hostAddress === undefined)(
  'kinds 8/10 and the kind 9 capsule in the oci runner; network only when granted',
  () => {
    let store: TestStore;
    let host: GitHost;
    let github: FakeGitHub;
    let server: SpawnedSvc;
    let node: SpawnedSvc;
    let base: string;
    let buyerKey: string;
    let ownerToken: string;
    let work: string;
    let listener: Server;
    let listenerPort = 0;
    let connections = 0;
    const image = `localhost/svc-e2e-runner:${process.pid}`;

    const api = async (path: string, body?: unknown, key = buyerKey) => {
      const res = await fetch(`${base}${path}`, {
        method: body === undefined ? 'GET' : 'POST',
        headers: {
          authorization: `Bearer ${key}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      return { status: res.status, text, json: (text ? JSON.parse(text) : {}) as Json };
    };
    const settledJob = (id: string) =>
      until(
        `job ${id} to end`,
        async () => {
          const j = (await api(`/api/v1/marketplace/jobs/${id}`)).json;
          return j.status === 'completed' || j.status === 'failed' ? j : undefined;
        },
        90_000,
      );
    const receiptOf = async (jobId: string) =>
      ((await api(`/api/v1/jobs/${jobId}/receipts`)).json.receipts as Json[])[0];
    const executionOf = async (jobId: string) =>
      ((await api(`/api/v1/jobs/${jobId}/evidence`)).json.events as Json[]).find(
        (e) => e.event_type === 'receipt.submitted',
      )?.metadata.execution;
    // This node's containers only: other test files (and the other store's pass) run containers of
    // their own nodes at the same time.
    let nodeId = '';
    const ours = () => safe(() => podman('ps', '-a', '-q', '--filter', `label=svc.node=${nodeId}`));
    /** No container of this node is left: removal follows the job's end by a moment. */
    const noneLeft = () => until('no container left', async () => (ours() === '' ? '' : undefined), 20_000);

    beforeAll(async () => {
      work = mkdtempSync(join(tmpdir(), 'svc-runner-images-'));
      writeFileSync(join(work, 'process.cjs'), PROGRAM);
      importRunnerImage(join(work, 'image'), image, {
        [join(work, 'process.cjs')]: '/opt/svc/process.cjs',
        [CAPSULE]: '/opt/svc/test-capsule.mjs',
      });
      listener = createServer((socket) => {
        connections += 1;
        socket.destroy();
      });
      await new Promise<void>((r) => listener.listen(0, '0.0.0.0', r));
      const address = listener.address();
      listenerPort = typeof address === 'object' && address ? address.port : 0;
      store = await createTestStore();
      host = await startGitHost(TOKEN);
      seedRepository(host.root, 'acme/widgets', {
        'package.json': JSON.stringify({ name: 'widgets', scripts: { test: 'node test/run.js' } }),
        'src/index.js': 'export const widgets = 1;\n',
        'test/run.js': "console.log('tests pass');\n",
      });
      github = await startFakeGitHub();
      server = spawnSvc(['serve', '--port', '0'], {
        SVC_DATA_DIR: store.dataDir,
        SVC_LEASE_SECONDS: '5',
        SVC_LOG_LEVEL: 'warn',
        SVC_DEFAULT_RUNNER_IMAGE: image,
        SVC_ALLOW_PRIVATE_EGRESS: '1',
        SVC_GITHUB_API_URL: github.url,
        SVC_GITHUB_HOSTS: new URL(host.url).host,
        ...(store.databaseUrl ? { DATABASE_URL: store.databaseUrl } : {}),
      });
      base = await waitForUrl(server, 180_000);
      const signup = (await (
        await fetch(`${base}/api/v1/auth/signup`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ email: 'owner@runner-images.test', password: 'runner images password' }),
        })
      ).json()) as { api_key: string; token: string };
      buyerKey = signup.api_key;
      ownerToken = signup.token;
      const operator = (await api('/api/v1/auth/api-keys', { label: 'node', scopes: ['operator'] }, ownerToken)).json
        .api_key as string;
      // No --image and no --allow-process-runner: the platform's default image, which podman holds, runs it all.
      node = spawnSvc(
        [
          'node',
          '--server',
          base,
          '--data-dir',
          join(work, 'node'),
          '--country',
          'CA',
          '--allow-job-network',
          '--max-memory',
          '512m',
          '--runner',
          `10=${process.execPath} /opt/svc/process.cjs`,
          '--capsule',
          process.execPath,
          '--capsule-arg',
          '/opt/svc/test-capsule.mjs',
        ],
        { SVC_NODE_API_KEY: operator },
      );
      nodeId = await until(
        'node registration',
        async () => /registered (node_[a-z0-9]+)/.exec(node.stdout())?.[1],
        120_000,
      ).catch((err: unknown) => {
        throw new Error(`${String(err)}: ${node.stdout()} ${node.stderr()}`);
      });
    }, 360_000);

    afterAll(async () => {
      node?.child.kill('SIGTERM');
      server?.child.kill('SIGTERM');
      await Promise.all([node?.exited, server?.exited]);
      await host?.close();
      await github?.close();
      listener?.close();
      safe(() => podman('rmi', '-f', image));
      await store?.drop();
      rmSync(work, { recursive: true, force: true });
    });

    it('ConfigResponse names the default image, and the node runs in it without --image', async () => {
      expect((await api('/api/v1/config')).json.default_runner_image).toBe(image);
      expect(node.stdout()).toContain(`oci runner (podman`);
      expect(node.stdout()).toContain(image);
    });

    it('kind 10: the program runs in a container, inputs read-only at /input, outputs from /output', async () => {
      const data = Buffer.from('capture notes\n');
      const site = (await api('/api/v1/sites', { name: 'Bridge 8', country: 'CA' })).json;
      const epoch = (await api(`/api/v1/sites/${site.id}/epochs`, { label: '2026-Q4' })).json;
      const created = await api('/api/v1/capture-sets', {
        site_epoch_id: epoch.id,
        source_type: 'lidar',
        manifest: {
          version: '1',
          files: [{ path: 'notes.txt', bytes: data.length, sha256: createHash('sha256').update(data).digest('hex') }],
        },
      });
      expect(created.status, created.text).toBe(201);
      const id = String(created.json.capture_set.id);
      await new Promise<void>((resolve, reject) =>
        new Upload(data, {
          endpoint: `${base}/api/v1/capture-sets/${id}/uploads`,
          headers: { authorization: `Bearer ${buyerKey}` },
          retryDelays: [],
          metadata: { path: 'notes.txt' },
          onError: reject,
          onSuccess: () => resolve(),
        }).start(),
      );
      expect((await api(`/api/v1/capture-sets/${id}/complete`, {})).json.capture_set.status).toBe('ready');
      const job = await api('/api/v1/marketplace/jobs', {
        kind: 10,
        budget: 2,
        max_price_per_unit: 1,
        currency: 'CAD',
        capture_set_id: id,
        timeout_seconds: 120,
        memory_mb: 256,
      });
      expect(job.status, job.text).toBe(201);
      const jobId = String(job.json.job_id);
      const done = await settledJob(jobId);
      expect(done.status, JSON.stringify(done)).toBe('completed');
      const set = await until('the capture set verified', async () => {
        const s = (await api(`/api/v1/capture-sets/${id}`)).json.capture_set;
        return s.status === 'verified' ? s : undefined;
      });
      expect((set.outputs as Json[]).map((o) => o.path)).toEqual([
        'at-input-output',
        'input-read-only',
        'summary.json',
      ]);
      expect((await receiptOf(jobId))?.metadata).toMatchObject({ runner: 'oci', image, engine: 'runner:10' });
      expect(await executionOf(jobId)).toEqual({ runner: 'oci', image, source: 'node_claim' });
      expect(await noneLeft()).toBe('');
    }, 150_000);

    it('kind 9: the capsule and its checks run in containers; the commit, checks and pull request follow', async () => {
      const repo = await api('/api/v1/work/repositories', {
        repository_url: `${host.url}/acme/widgets.git`,
        label: 'widgets',
        repo_host_token: TOKEN,
      });
      expect(repo.status, repo.text).toBe(201);
      const created = await api('/api/v1/work/orders', {
        goal: 'WRITE src/feature.js export const feature = true;',
        title: 'Add the feature flag',
        repository_connection_id: repo.json.id,
        policy_preset: 'standard_feature',
        jurisdiction: 'CA',
      });
      expect(created.status, created.text).toBe(201);
      const done = await until(
        'the order settled',
        async () => {
          const o = (await api(`/api/v1/work/orders/${String(created.json.id)}`)).json;
          if (o.status === 'approved' && !o.failure_reason) return undefined;
          return ['pr_opened', 'failed', 'blocked', 'needs_review'].includes(String(o.status)) ? o : undefined;
        },
        150_000,
      );
      expect(done.status, JSON.stringify(done)).toBe('pr_opened');
      expect(done.changed_paths).toEqual(['src/feature.js']);
      // npm test in the image (npm and node copied in), then the capsule's own check.
      expect((done.checks as Json[]).map((c) => [c.command, c.exit_code])).toEqual([
        ['npm test', 0],
        [`${process.execPath} test/run.js`, 0],
      ]);
      expect(host.git('acme/widgets', ['show', `${String(done.commit_sha)}:src/feature.js`])).toBe(
        'export const feature = true;\n',
      );
      expect((await receiptOf(String(done.job_id)))?.metadata).toMatchObject({ runner: 'oci', image });
      expect(await noneLeft()).toBe('');
    }, 200_000);

    it('network: a kind 5 job reaches the listener only when granted egress on a node allowing it', async () => {
      const connect = `echo hello | nc -w 3 ${hostAddress} ${listenerPort}; echo nc=$?`;
      const submit = async (fields: Record<string, unknown>) => {
        const r = await api('/api/v1/marketplace/jobs', {
          kind: 5,
          budget: 0.5,
          max_price_per_unit: 0.0001,
          currency: 'CAD',
          timeout_seconds: 60,
          runner_args: ['sh', '-c', connect],
          ...fields,
        });
        expect(r.status, r.text).toBe(201);
        const id = String(r.json.job_id);
        expect((await settledJob(id)).status).toBe('completed');
        return (await api(`/api/v1/marketplace/jobs/${id}/result`)).json;
      };
      const closed = await submit({});
      expect(closed.stdout).toContain('nc=1');
      expect(connections).toBe(0);
      const granted = await submit({ network: 'egress' });
      expect(granted.stdout).toContain('nc=0');
      expect(connections).toBe(1);
      expect(await noneLeft()).toBe('');
    }, 150_000);
  },
);

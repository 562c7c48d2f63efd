import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { detectOciRunner } from '@svc/node-agent';
import { createTestStore, type TestStore } from '@svc/server/testing';
import { buildBusyboxArchive, podman, safe } from './busybox-image.js';
import { spawnSvc, until, waitForUrl, type SpawnedSvc } from './spawn.js';

// npm test: one store: the subject is the container (its limits, what escapes it, kill -9 of its
// agent); the store side of jobs, re-queues and charges runs on both stores in packages/server.

interface JobBody {
  status?: string;
  node_id?: string | null;
  attempts?: number;
  charged_cents?: number;
  failure_reason?: string | null;
}
interface ContainerOutput {
  stdout: string;
  stderr: string;
  exit_code: number | null;
  timed_out: boolean;
  runner: string;
  image: string;
  limits: { memory_mb: number; cpus: number; pids: number; timeout_s: number };
  outputs: { path: string; bytes: number }[];
}

const probe = await detectOciRunner();
const skip = !probe.available || !/busybox/.test(safe(() => execFileSync('/bin/busybox', ['--help']).toString()));
if (skip) console.log(`oci-runner.e2e: skipped: podman cannot run containers here (${probe.reasons.join('; ')})`);

describe.skipIf(skip)('the oci runner with real podman: svc serve, svc node --image, kind 5 escape attempts', () => {
  let store: TestStore;
  let server: SpawnedSvc;
  let base: string;
  let buyerKey: string;
  let operatorKey: string;
  let work: string;
  let archive: string;
  let listener: Server;
  let listenerPort = 0;
  let connections = 0;
  const image = `localhost/svc-e2e-busybox:${process.pid}`;
  const secret = `operator secret ${Math.random()}`;
  let node: { proc: SpawnedSvc; dir: string; home: string; nodeId: string } | undefined;

  const api = async (path: string, init: { body?: unknown; key?: string } = {}) => {
    const res = await fetch(`${base}${path}`, {
      method: init.body ? 'POST' : 'GET',
      headers: {
        authorization: `Bearer ${init.key ?? buyerKey}`,
        ...(init.body ? { 'content-type': 'application/json' } : {}),
      },
      body: init.body ? JSON.stringify(init.body) : undefined,
    });
    const text = await res.text();
    return { status: res.status, body: (text ? JSON.parse(text) : {}) as Record<string, unknown> };
  };
  const job = async (id: string) => (await api(`/api/v1/marketplace/jobs/${id}`)).body as JobBody;
  const submit = async (fields: Record<string, unknown>) => {
    const r = await api('/api/v1/marketplace/jobs', {
      body: { kind: 5, budget: 0.5, max_price_per_unit: 0.0001, currency: 'CAD', timeout_seconds: 60, ...fields },
    });
    expect(r.status).toBe(201);
    return r.body.job_id as string;
  };
  const settled = (id: string, timeoutMs = 60_000) =>
    until(
      `job ${id} to end`,
      async () => {
        const j = await job(id);
        return j.status === 'completed' || j.status === 'failed' ? j : undefined;
      },
      timeoutMs,
    );
  const output = async (id: string) =>
    (await (
      await fetch(`${base}/api/v1/marketplace/jobs/${id}/result`, { headers: { authorization: `Bearer ${buyerKey}` } })
    ).json()) as ContainerOutput;
  const ours = () => (node ? podman('ps', '-a', '-q', '--filter', `label=svc.node=${node.nodeId}`) : '');
  const startNode = async (dir: string, home: string) => {
    const proc = spawnSvc(
      ['node', '--server', base, '--data-dir', dir, '--image', archive, '--max-memory', '256m', '--max-cpus', '1'],
      { SVC_NODE_API_KEY: operatorKey, HOME: home },
    );
    const nodeId = await until('node registration', async () => /registered (node_[a-z0-9]+)/.exec(proc.stdout())?.[1]);
    return { proc, dir, home, nodeId };
  };

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'svc-oci-e2e-'));
    archive = buildBusyboxArchive(work, image);
    listener = createServer((socket) => {
      connections += 1;
      socket.destroy();
    });
    await new Promise<void>((r) => listener.listen(0, '127.0.0.1', r));
    const address = listener.address();
    listenerPort = typeof address === 'object' && address ? address.port : 0;
    store = await createTestStore();
    server = spawnSvc(['serve', '--port', '0'], {
      SVC_DATA_DIR: store.dataDir,
      SVC_LEASE_SECONDS: '3',
      SVC_LOG_LEVEL: 'warn',
      ...(store.databaseUrl ? { DATABASE_URL: store.databaseUrl } : {}),
    });
    base = await waitForUrl(server);
    const signup = async (email: string) =>
      (await (
        await fetch(`${base}/api/v1/auth/signup`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ email, password: 'end to end password' }),
        })
      ).json()) as { api_key: string; token: string };
    buyerKey = (await signup('buyer@oci.test')).api_key;
    const owner = (await signup('operator@oci.test')).token;
    operatorKey = (await api('/api/v1/auth/api-keys', { body: { label: 'node', scopes: ['operator'] }, key: owner }))
      .body.api_key as string;
    const dir = join(work, 'node');
    const home = join(work, 'home');
    mkdirSync(home, { recursive: true });
    writeFileSync(join(home, 'secret.txt'), secret, { mode: 0o600 });
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, 'operator-secret.txt'), secret, { mode: 0o600 });
    node = await startNode(dir, home);
  }, 120_000);

  afterAll(async () => {
    node?.proc.child.kill('SIGKILL');
    if (node) await node.proc.exited;
    if (node) safe(() => podman('rm', '-f', '-t', '0', ...ours().split('\n').filter(Boolean)));
    safe(() => podman('rmi', '-f', image));
    server?.child.kill('SIGTERM');
    if (server) await server.exited;
    listener?.close();
    await store?.drop();
    rmSync(work, { recursive: true, force: true });
  });

  it('declares runner:oci and its image, not the process runner; the receipt names runner and image', async () => {
    const nodes = (await api('/api/v1/nodes', { key: operatorKey })).body.nodes as { managed_oci_gpu_ready: boolean }[];
    expect(nodes[0]?.managed_oci_gpu_ready).toBe(false);
    const id = await submit({ runner_args: ['sh', '-c', 'id -u; echo done > /output/result.txt'] });
    const done = await settled(id);
    expect(done.status).toBe('completed');
    const out = await output(id);
    expect(out.stdout).toBe('0\n'); // container root, mapped to an unprivileged host range
    expect(out.runner).toBe('oci');
    expect(out.image).toBe(image);
    expect(out.outputs).toEqual([{ path: 'result.txt', bytes: 5 }]);
    const receipts = (await api(`/api/v1/jobs/${id}/receipts`)).body.receipts as {
      metadata: Record<string, unknown>;
    }[];
    expect(receipts[0]?.metadata).toMatchObject({ runner: 'oci', image, engine: 'oci' });
    expect(ours()).toBe('');
  });

  it("cannot read the operator's files", async () => {
    const id = await submit({
      runner_args: [
        'sh',
        '-c',
        `cat ${join(node?.home ?? '', 'secret.txt')} ${join(node?.dir ?? '', 'operator-secret.txt')}; ls /; echo rc=$?`,
      ],
    });
    expect((await settled(id)).status).toBe('completed');
    const out = await output(id);
    expect(out.stdout + out.stderr).not.toContain(secret);
    expect(out.stderr).toContain('No such file or directory');
    expect(ours()).toBe('');
  });

  it('writes only to its output directory', async () => {
    const id = await submit({
      runner_args: [
        'sh',
        '-c',
        'echo x > /bin/owned; echo x > /owned; echo y > /tmp/scratch; echo ok > /output/ok.txt',
      ],
    });
    expect((await settled(id)).status).toBe('completed');
    const out = await output(id);
    expect(out.stderr.match(/Read-only file system/g)).toHaveLength(2);
    expect(out.outputs).toEqual([{ path: 'ok.txt', bytes: 3 }]);
    expect(ours()).toBe('');
  });

  it('opens no TCP connection: the loopback listener receives nothing', async () => {
    const id = await submit({
      runner_args: ['sh', '-c', `echo hello | nc -w 2 127.0.0.1 ${listenerPort}; echo nc=$?`],
    });
    expect((await settled(id)).status).toBe('completed');
    const out = await output(id);
    expect(out.stdout).toMatch(/nc=1/);
    expect(connections).toBe(0);
    expect(ours()).toBe('');
  });

  it('a fork bomb stops at the pids limit', async () => {
    const id = await submit({
      pids: 32,
      timeout_seconds: 20,
      runner_args: [
        'sh',
        '-c',
        '(for i in $(seq 1 200); do sleep 30 & done) 2>/tmp/err; n=0; for p in /proc/[0-9]*; do n=$((n+1)); done; read line < /tmp/err; echo "procs=$n $line"',
      ],
    });
    expect((await settled(id)).status).toBe('completed');
    const out = await output(id);
    expect(out.limits.pids).toBe(32);
    const procs = Number(/procs=(\d+)/.exec(out.stdout)?.[1]);
    expect(procs).toBeGreaterThan(10);
    expect(procs).toBeLessThanOrEqual(32);
    expect(out.stdout).toMatch(/can't fork/);
    expect(ours()).toBe('');
  });

  it('allocating past the memory limit is OOM-killed and the job fails saying so', async () => {
    const id = await submit({
      memory_mb: 32,
      runner_args: ['sh', '-c', 'dd if=/dev/zero of=/dev/null bs=128M count=1'],
    });
    const done = await settled(id);
    expect(done.status).toBe('failed');
    expect(done.failure_reason).toMatch(/OOM killer.*memory limit of 32 MB/);
    expect(ours()).toBe('');
  });

  it('running past the time limit is stopped', async () => {
    const started = Date.now();
    const id = await submit({ timeout_seconds: 2, runner_args: ['sh', '-c', 'echo begun; sleep 60; echo never'] });
    expect((await settled(id)).status).toBe('completed');
    const out = await output(id);
    expect(out.timed_out).toBe(true);
    expect(out.stdout).toBe('begun\n');
    expect(Date.now() - started).toBeLessThan(30_000);
    expect(ours()).toBe('');
  });

  it('a job naming an image the node does not hold is not matched to it', async () => {
    const id = await submit({ image: 'localhost/not-on-any-node:1', runner_args: ['sh', '-c', 'true'] });
    await new Promise((r) => setTimeout(r, 3_000));
    const j = await job(id);
    expect(j.status).toBe('pending');
    expect(j.node_id ?? null).toBeNull();
    await api(`/api/v1/marketplace/jobs/${id}/cancel`, { body: {} });
  });

  it('kill -9 of the agent mid-container: the container goes, the job is re-queued and charged once', async () => {
    const current = node;
    if (!current) throw new Error('no node');
    const id = await submit({ runner_args: ['sh', '-c', 'sleep 4; echo finished'] });
    await until('the container running', async () => (ours() !== '' ? true : undefined));
    current.proc.child.kill('SIGKILL');
    await current.proc.exited;
    const killedAt = Date.now();
    await until('the container removed', async () => (ours() === '' ? true : undefined), 20_000);
    const gone = Date.now() - killedAt;
    console.log(`oci-runner.e2e: the container was removed ${gone} ms after kill -9 of the agent`);
    expect(gone).toBeLessThan(10_000);
    node = await startNode(current.dir, current.home);
    expect(node.nodeId).toBe(current.nodeId);
    const done = await settled(id, 90_000);
    expect(done.status).toBe('completed');
    expect(done.attempts).toBe(2);
    expect((await output(id)).stdout).toBe('finished\n');
    expect((await api(`/api/v1/jobs/${id}/receipts`)).body.receipts).toHaveLength(1);
    const ledger = (await api('/api/v1/billing/transactions')).body.transactions as { tx_type: string; ref: string }[];
    expect(ledger.filter((t) => t.ref === id && t.tx_type === 'charge').length).toBeLessThanOrEqual(1);
    expect(ours()).toBe('');
  }, 150_000);
});

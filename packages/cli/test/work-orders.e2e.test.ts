import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestStore, type TestStore } from '@svc/server/testing';
import { seedRepository, startFakeGitHub, startGitHost, type FakeGitHub, type GitHost } from './git-server.js';
import { spawnSvc, until, waitForUrl, type SpawnedSvc } from './spawn.js';

const CAPSULE = fileURLToPath(new URL('./fixtures/test-capsule.mjs', import.meta.url));
const TOKEN = `ghp_e2eSecretToken${Date.now()}`;

type Body = Record<string, unknown> & {
  id?: string;
  status?: string;
  decision?: { certification: string; reasons: string[] } | null;
  pr_url?: string | null;
  commit_sha?: string | null;
  work_branch?: string;
  approvals?: { decision: string; by: string; role: string; reason: string | null }[];
  rollback?: { outcome: string; branch: string | null; revert_commit: string | null; rollback_point: string } | null;
};

describe('work orders end to end: svc serve, svc node --capsule, a token-protected git host, a fake GitHub', () => {
  let store: TestStore;
  let host: GitHost;
  let github: FakeGitHub;
  let server: SpawnedSvc;
  let node: SpawnedSvc;
  let nodeDir: string;
  let base: string;
  let ownerKey: string;
  let ownerId: string;
  let repoId: string;
  let certifiedId = '';
  const seen: string[] = [];

  const api = async (path: string, init: { method?: string; body?: unknown; key?: string } = {}) => {
    const res = await fetch(`${base}${path}`, {
      method: init.method ?? (init.body !== undefined ? 'POST' : 'GET'),
      headers: {
        authorization: `Bearer ${init.key ?? ownerKey}`,
        ...(init.body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      body: init.body !== undefined ? JSON.stringify(init.body) : undefined,
    });
    const text = await res.text();
    seen.push(text);
    return { status: res.status, text, body: (text ? JSON.parse(text) : {}) as Body };
  };
  const order = (id: string) => api(`/api/v1/work/orders/${id}`).then((r) => r.body);
  const settled = (id: string, statuses: string[]) =>
    until(
      `order ${id} in ${statuses.join('|')}`,
      async () => {
        const o = await order(id);
        // `approved` without a failure is the moment between the approval and the pull request.
        if (o.status === 'approved' && !o.failure_reason) return undefined;
        return statuses.includes(o.status ?? '') ? o : undefined;
      },
      90_000,
    );
  const createOrder = async (goal: string, extra: Record<string, unknown> = {}) => {
    const r = await api('/api/v1/work/orders', {
      body: { goal, repository_connection_id: repoId, policy_preset: 'standard_feature', jurisdiction: 'CA', ...extra },
    });
    expect(r.status, r.text).toBe(201);
    return r.body;
  };

  beforeAll(async () => {
    store = await createTestStore();
    host = await startGitHost(TOKEN);
    seedRepository(host.root, 'acme/widgets', {
      'package.json': JSON.stringify({ name: 'widgets', scripts: { test: 'node test/run.js', lint: 'node -e 0' } }),
      'src/index.js': 'export const widgets = 1;\n',
      'test/run.js': "console.log('tests pass');\n",
      'README.md': '# widgets\n',
    });
    github = await startFakeGitHub();
    server = spawnSvc(['serve', '--port', '0'], {
      SVC_DATA_DIR: store.dataDir,
      SVC_ALLOW_PRIVATE_EGRESS: '1',
      SVC_LOG_LEVEL: 'info',
      SVC_GITHUB_API_URL: github.url,
      SVC_GITHUB_HOSTS: new URL(host.url).host,
      ...(store.databaseUrl ? { DATABASE_URL: store.databaseUrl } : {}),
    });
    // Generous: on a loaded machine an embedded store takes a while to open.
    base = await waitForUrl(server, 180_000);
    const signup = (await (
      await fetch(`${base}/api/v1/auth/signup`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: 'owner@wo.test', password: 'work order password' }),
      })
    ).json()) as { api_key: string; buyer_id: string; token: string };
    ownerKey = signup.api_key;
    ownerId = signup.buyer_id;
    // A buyer key may not mint an operator key (its scopes do not imply it); the owner's session may.
    const operator = (
      await api('/api/v1/auth/api-keys', { body: { label: 'capsule node', scopes: ['operator'] }, key: signup.token })
    ).body.api_key as string;
    nodeDir = mkdtempSync(join(tmpdir(), 'svc-wo-node-'));
    node = spawnSvc(
      [
        'node',
        '--server',
        base,
        '--data-dir',
        nodeDir,
        '--country',
        'CA',
        // The process-runner variant; runner-images.e2e.test.ts runs the capsule in the oci runner.
        '--allow-process-runner',
        '--capsule',
        process.execPath,
        '--capsule-arg',
        CAPSULE,
      ],
      { SVC_NODE_API_KEY: operator },
    );
    await until('node registration', async () => /registered (node_[a-z0-9]+)/.exec(node.stdout())?.[1], 120_000);
  }, 360_000);

  afterAll(async () => {
    node?.child.kill('SIGTERM');
    server?.child.kill('SIGTERM');
    await Promise.all([node?.exited, server?.exited]);
    await host?.close();
    await github?.close();
    if (nodeDir) rmSync(nodeDir, { recursive: true, force: true });
    await store?.drop();
  });

  it('connects a repository: the token is sealed, never returned', async () => {
    const r = await api('/api/v1/work/repositories', {
      body: { repository_url: `${host.url}/acme/widgets.git`, label: 'widgets', repo_host_token: TOKEN },
    });
    expect(r.status, r.text).toBe(201);
    expect(r.body).toMatchObject({
      repository_url: `${host.url}/acme/widgets.git`,
      default_branch: 'main',
      label: 'widgets',
      has_token: true,
    });
    expect(r.body.token_key_id).toMatch(/^tk_[0-9a-f]{12}$/);
    repoId = String(r.body.id);
    const list = await api('/api/v1/work/repositories');
    expect((list.body.repositories as { id: string }[]).map((x) => x.id)).toEqual([repoId]);
  });

  it('preflight: ready when the requested tooling is there, blocked when it is not', async () => {
    const ready = await api(`/api/v1/work/repositories/${repoId}/preflight`, {
      body: { tooling: ['npm', 'test'], jurisdiction: 'CA', timeout_seconds: 60 },
    });
    expect(ready.status, ready.text).toBe(200);
    expect(ready.body).toMatchObject({ status: 'ready', base_branch: 'main', missing: [] });
    expect(ready.body.tooling).toMatchObject({
      package_managers: ['npm'],
      test_commands: ['npm test', 'npm run lint'],
    });
    expect(ready.body.evidence_path).toBe(`/api/v1/jobs/${String(ready.body.job_id)}/evidence`);
    expect((ready.body.repository as { last_preflight_status: string }).last_preflight_status).toBe('ready');
    const blocked = await api(`/api/v1/work/repositories/${repoId}/preflight`, {
      body: { tooling: ['npm', 'cargo'], timeout_seconds: 60 },
    });
    expect(blocked.body).toMatchObject({ status: 'blocked', missing: ['cargo'] });
    expect(String(blocked.body.next_action)).toContain('cargo');
  }, 120_000);

  it('certifies an order inside the policy, approves it by policy and opens the pull request', async () => {
    const created = await createOrder('WRITE src/feature.js export const feature = true;', {
      title: 'Add the feature flag',
    });
    expect(created).toMatchObject({
      status: 'queued',
      base_branch: 'main',
      trust_tier: 'certified',
      allowed_paths: ['src/**', 'test/**', 'tests/**', 'docs/**'],
      required_checks: ['test'],
    });
    const done = await settled(String(created.id), ['pr_opened', 'failed', 'blocked', 'needs_review', 'approved']);
    expect(done.status, JSON.stringify(done)).toBe('pr_opened');
    certifiedId = String(done.id);
    expect(done.decision?.certification).toBe('certified');
    expect(done.approvals).toEqual([expect.objectContaining({ decision: 'approved', by: 'policy' })]);
    expect(done.changed_paths).toEqual(['src/feature.js']);
    // The server's command for the required `test` (package.json's script) runs first, then the capsule's own.
    expect((done.checks as { command: string; exit_code: number }[]).map((c) => [c.command, c.exit_code])).toEqual([
      ['npm test', 0],
      [`${process.execPath} test/run.js`, 0],
    ]);
    expect(done.decision).toMatchObject({
      node_trust: 'own',
      check_commands: [{ check: 'test', command: 'npm test' }],
    });
    expect(done.server_verified).toMatchObject({ changed_paths: ['src/feature.js'] });
    // The branch is on the host at the certified commit, and GitHub got the pull request with the token.
    expect(host.git('acme/widgets', ['rev-parse', `refs/heads/${String(done.work_branch)}`]).trim()).toBe(
      done.commit_sha,
    );
    const pr = github.pulls.find((p) => p.head === done.work_branch);
    expect(pr).toMatchObject({
      owner: 'acme',
      repo: 'widgets',
      base: 'main',
      title: 'Add the feature flag',
      authorization: `token ${TOKEN}`,
    });
    expect(done.pr_url).toBe(`https://github.test/acme/widgets/pull/${String(pr?.number)}`);
    const diff = await api(`/api/v1/work/orders/${String(done.id)}/diff`);
    expect(String(diff.body.diff)).toContain('+export const feature = true;');
    // The bundle verifies offline.
    const bundle = await api(`/api/v1/work/orders/${String(done.id)}/evidence/bundle`);
    const parsed = JSON.parse(bundle.text) as {
      work_order: { decision: { certification: string }; pr: { url: string }; job_receipt: { job_id: string } };
      evidence: { events: { event_type: string }[] };
    };
    expect(parsed.work_order.decision.certification).toBe('certified');
    expect(parsed.work_order.job_receipt.job_id).toBe(done.job_id);
    expect(parsed.evidence.events.map((e) => e.event_type)).toEqual([
      'work_order.created',
      'policy.evaluated',
      'preflight.completed',
      'capsule.queued',
      'capsule.started',
      'capsule.finished',
      'check.executed',
      'check.executed',
      'diff.produced',
      'certification.decided',
      'approval.recorded',
      'pr.opened',
    ]);
    const dir = mkdtempSync(join(tmpdir(), 'svc-wo-bundle-'));
    writeFileSync(join(dir, 'bundle.json'), bundle.text);
    const verify = spawnSvc(['verify', join(dir, 'bundle.json')]);
    expect(await verify.exited, verify.stdout() + verify.stderr()).toBe(0);
    for (const check of [
      'work_order',
      'work_order_decision',
      'work_order_commit',
      'work_order_approvals',
      'work_order_pr',
      'work_order_receipt',
    ])
      expect(verify.stdout()).toMatch(new RegExp(`^PASS  ${check}  `, 'm'));
    // A section that claims another decision than the signed graph fails, whatever its bundle_hash.
    const tampered = JSON.parse(bundle.text) as { work_order: { decision: { reasons: string[] } } };
    tampered.work_order.decision.reasons = ['nothing to see'];
    writeFileSync(join(dir, 'tampered.json'), JSON.stringify(tampered));
    const refused = spawnSvc(['verify', join(dir, 'tampered.json')]);
    expect(await refused.exited).toBe(1);
    expect(refused.stdout()).toMatch(/^FAIL {2}work_order_decision {2}/m);
    rmSync(dir, { recursive: true, force: true });
  }, 120_000);

  it('blocks an order that changes a forbidden path; it cannot be approved', async () => {
    const created = await createOrder('WRITE src/ok.js ok\nWRITE .github/workflows/evil.yml on: push');
    const done = await settled(String(created.id), ['blocked', 'failed', 'certified', 'needs_review', 'pr_opened']);
    expect(done.status).toBe('blocked');
    expect(done.decision?.reasons).toContain('forbidden path changed: .github/workflows/evil.yml');
    const approve = await api(`/api/v1/work/orders/${String(done.id)}/approve`, { body: {} });
    expect(approve.status).toBe(409);
    expect(github.pulls.some((p) => p.head === done.work_branch)).toBe(false);
  }, 120_000);

  it('holds an order outside the allowed paths for review, then an owner approves it; a rollback reverts it', async () => {
    const created = await createOrder('WRITE README.md # widgets, documented');
    const held = await settled(String(created.id), ['needs_review', 'failed', 'blocked', 'pr_opened']);
    expect(held.status).toBe('needs_review');
    expect(held.decision?.reasons).toEqual(['outside the allowed paths: README.md']);
    // A member may read the order but not decide it.
    const invite = await api('/api/v1/organizations/current/invites', {
      body: { email: 'member@wo.test', role: 'member' },
    });
    const member = await api('/api/v1/organizations/invites/accept', {
      body: { token: invite.body.invite_token, password: 'member password!' },
    });
    const memberToken = String(member.body.token);
    expect((await api(`/api/v1/work/orders/${String(held.id)}`, { key: memberToken })).status).toBe(200);
    const refused = await api(`/api/v1/work/orders/${String(held.id)}/approve`, { body: {}, key: memberToken });
    expect(refused.status, refused.text).toBe(403);
    expect(refused.body).toMatchObject({ error: 'forbidden' });
    const approved = await api(`/api/v1/work/orders/${String(held.id)}/approve`, {
      body: { reason: 'README only, reviewed' },
    });
    expect(approved.status, approved.text).toBe(200);
    expect(approved.body.status).toBe('pr_opened');
    expect(approved.body.approvals).toEqual([
      expect.objectContaining({ decision: 'approved', by: ownerId, role: 'owner', reason: 'README only, reviewed' }),
    ]);
    // The pull request is merged (fast-forward on the host), then rolled back: a revert branch and pull request.
    host.git('acme/widgets', ['update-ref', 'refs/heads/main', String(approved.body.commit_sha)]);
    const rolled = await api(`/api/v1/work/orders/${String(held.id)}/rollback`, {
      body: { reason: 'broke the docs build' },
    });
    expect(rolled.status, rolled.text).toBe(200);
    expect(rolled.body.status).toBe('rolled_back');
    expect(rolled.body.rollback).toMatchObject({
      outcome: 'reverted',
      branch: `${String(held.work_branch)}-rollback`,
      rollback_point: held.base_commit,
    });
    const revertTree = host.git('acme/widgets', ['show', `refs/heads/${String(held.work_branch)}-rollback:README.md`]);
    expect(revertTree).toBe('# widgets\n');
    expect(github.pulls.find((p) => p.head === `${String(held.work_branch)}-rollback`)).toMatchObject({ base: 'main' });
    expect((await api(`/api/v1/work/orders/${String(held.id)}/rollback`, { body: {} })).status).toBe(409);
    // The bundle carries the rollback's own signed run, and svc verify checks it.
    const bundle = await api(`/api/v1/work/orders/${String(held.id)}/evidence/bundle`);
    const dir = mkdtempSync(join(tmpdir(), 'svc-wo-rollback-'));
    writeFileSync(join(dir, 'bundle.json'), bundle.text);
    const verify = spawnSvc(['verify', join(dir, 'bundle.json')]);
    expect(await verify.exited, verify.stdout()).toBe(0);
    expect(verify.stdout()).toMatch(/^PASS {2}work_order_rollback {2}rollback run signed/m);
    rmSync(dir, { recursive: true, force: true });
  }, 120_000);

  it('under trust tier reviewed a certified order waits for a person; a rejection is recorded and ends it', async () => {
    const created = await createOrder('WRITE src/reviewed.js export const reviewed = true;', {
      trust_tier: 'reviewed',
    });
    const held = await settled(String(created.id), ['certified', 'needs_review', 'blocked', 'failed', 'pr_opened']);
    expect(held).toMatchObject({ status: 'certified', trust_tier: 'reviewed', approvals: [] });
    const rejected = await api(`/api/v1/work/orders/${String(held.id)}/reject`, {
      body: { reason: 'not this quarter' },
    });
    expect(rejected.status, rejected.text).toBe(200);
    expect(rejected.body).toMatchObject({ status: 'rejected', pr_url: null });
    expect(rejected.body.approvals).toEqual([
      expect.objectContaining({ decision: 'rejected', by: ownerId, role: 'owner', reason: 'not this quarter' }),
    ]);
    expect((await api(`/api/v1/work/orders/${String(held.id)}/approve`, { body: {} })).status).toBe(409);
    const graph = (await api(`/api/v1/work/orders/${String(held.id)}/evidence`)).body as {
      events: { event_type: string }[];
      certificate: { signed: boolean; verified: boolean };
    };
    expect(graph.events.at(-1)?.event_type).toBe('approval.recorded');
    expect(graph.certificate).toMatchObject({ signed: true, verified: true });
    expect(github.pulls.some((p) => p.head === held.work_branch)).toBe(false);
  }, 120_000);

  it('rolls back an order whose pull request was never merged: the work branch is withdrawn and the pull request closed', async () => {
    const before = await order(certifiedId);
    const pr = github.pulls.find((p) => p.head === before.work_branch);
    const rolled = await api(`/api/v1/work/orders/${certifiedId}/rollback`, { body: {} });
    expect(rolled.status, rolled.text).toBe(200);
    expect(rolled.body.rollback).toMatchObject({
      outcome: 'withdrawn',
      branch: null,
      rollback_point: before.base_commit,
    });
    expect(github.updates).toContainEqual({ number: pr?.number, state: 'closed' });
    expect(host.git('acme/widgets', ['branch', '--list', String(before.work_branch)]).trim()).toBe('');
  }, 120_000);

  it("hides an organization's orders and connections from another (404)", async () => {
    const list = await api('/api/v1/work/orders');
    const someId = (list.body.orders as { id: string }[])[0]?.id ?? '';
    expect(someId).not.toBe('');
    const other = (await (
      await fetch(`${base}/api/v1/auth/signup`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email: 'other@wo.test', password: 'another password!' }),
      })
    ).json()) as { api_key: string };
    for (const path of [
      `/api/v1/work/orders/${someId}`,
      `/api/v1/work/orders/${someId}/diff`,
      `/api/v1/work/orders/${someId}/evidence/bundle`,
      `/api/v1/work/repositories/${repoId}`,
    ]) {
      expect((await api(path, { key: other.api_key })).status).toBe(404);
    }
    expect((await api(`/api/v1/work/orders/${someId}/approve`, { body: {}, key: other.api_key })).status).toBe(404);
    expect((await api('/api/v1/work/orders', { key: other.api_key })).body.orders).toEqual([]);
  });

  it('refuses bad orders and connections with 400, and deletes a connection (its token erased)', async () => {
    const bad = async (path: string, body: unknown) => {
      const r = await api(path, { body });
      expect(r.status, r.text).toBe(400);
      return r.body as { error: string; message: string };
    };
    expect((await bad('/api/v1/work/orders', { goal: 'x' })).message).toBe(
      'repository_url or repository_connection_id is required',
    );
    await bad('/api/v1/work/orders', { goal: 'x', repository_connection_id: repoId, policy_preset: 'anything' });
    expect(
      (await bad('/api/v1/work/orders', { goal: 'x', repository_connection_id: repoId, work_branch: 'main' })).message,
    ).toBe('work_branch must differ from base_branch');
    await bad('/api/v1/work/orders', { goal: 'x', repository_connection_id: repoId, work_branch: '../x' });
    expect(
      (await bad('/api/v1/work/orders', { goal: 'x', repository_connection_id: repoId, model: 'whisper-base' }))
        .message,
    ).toContain('must be a chat model');
    expect(
      (await bad('/api/v1/work/orders', { goal: 'x', repository_connection_id: repoId, base_branch: 'no-such-branch' }))
        .message,
    ).toContain('no-such-branch branch could not be fetched');
    await bad('/api/v1/work/repositories', { repository_url: 'ftp://x/y.git' });
    const extra = await api('/api/v1/work/repositories', {
      body: { repository_url: `${host.url}/acme/widgets.git`, repo_host_token: TOKEN },
    });
    const id = String(extra.body.id);
    expect((await api(`/api/v1/work/repositories/${id}`, { method: 'DELETE' })).status).toBe(200);
    expect((await api(`/api/v1/work/repositories/${id}`)).status).toBe(404);
    expect((await api(`/api/v1/work/repositories/${id}`, { method: 'DELETE' })).status).toBe(404);
    expect((await api(`/api/v1/work/repositories/${id}/preflight`, { body: {} })).status).toBe(404);
  });

  it('never shows the host token in a response or a log line', () => {
    expect(seen.length).toBeGreaterThan(10);
    for (const text of [...seen, server.stdout(), server.stderr(), node.stdout(), node.stderr()])
      expect(text).not.toContain(TOKEN);
    // The token was used: every request the git host answered carried it.
    expect(host.requests.length).toBeGreaterThan(5);
    expect(host.requests.every((r) => r.authorized)).toBe(true);
  });
});

import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type { ExecuteResult } from '@svc/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  bearer,
  createKey,
  createTestApp,
  createTestNode,
  signUp,
  type TestApp,
  type TestBuyer,
  type TestNode,
  type WorkItem,
} from '../../../test/harness.js';
import { startDumbGitHost, type DumbGitHost } from '../../../test/dumb-git-host.js';
import { payableEarnings } from '../billing/service.js';
import { ledgerOfRefAllOrgs } from '../billing/store.js';
import { findNode, REFUSED_RECEIPT_PENALTY } from '../nodes/store.js';
import { syncOrder } from './orders.js';
import { findOrder } from './store.js';

/**
 * Issue 40, points 2 and 5: what a node reports is not what the server certifies on, a required
 * check is a command of the repository's own tooling, a stranger's node is not trusted to
 * approve, and a member cannot get a change approved without an owner or admin.
 */

const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');
type Order = Record<string, unknown> & {
  id: string;
  status: string;
  trust_tier: string;
  decision: {
    certification: string;
    reasons: string[];
    auto_approve: boolean;
    node_id: string;
    node_trust: string;
  } | null;
  approvals: { by: string }[];
  changed_paths: string[];
  failure_reason: string | null;
  pr: unknown;
  server_verified: { changed_paths: string[]; check_commands: { check: string; command: string }[] } | null;
  node_claim: { changed_paths: string[]; checks: { command: string }[]; basis: string } | null;
};

describe('work-order certification rests on what the server recomputes (issue 40)', () => {
  let t: TestApp;
  let host: DumbGitHost;
  let owner: TestBuyer;
  let ownNode: TestNode;
  let strangerNode: TestNode;
  let stranger: TestBuyer;
  let repoUrl: string;
  let work: string;

  const api = async (method: 'GET' | 'POST', url: string, key: string, payload?: unknown) => {
    const res = await t.app.inject({ method, url, headers: bearer(key), payload: payload as object | undefined });
    return { status: res.statusCode, body: res.json() as Order & Record<string, unknown> };
  };
  const createOrder = async (key: string, extra: Record<string, unknown> = {}) => {
    const r = await api('POST', '/api/v1/work/orders', key, {
      goal: 'add a.js',
      repository_url: repoUrl,
      policy_preset: 'standard_feature',
      ...extra,
    });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    return r.body;
  };
  /** The node takes the order's job and commits `files` on the work branch, as a capsule would. */
  const commitWork = async (node: TestNode, files: Record<string, string>) => {
    const [item] = await node.poll({ waitMs: 2000 });
    if (!item) throw new Error('the node got no work');
    const order = item.payload.order as { work_branch: string; check_commands?: string[][] };
    const base = String(item.payload.base_commit);
    // The local path, not the URL: a synchronous git against this process's own server would wait forever.
    host.git(work, ['fetch', '--quiet', join(host.root, 'acme/widgets.git'), 'main']);
    host.git(work, ['checkout', '--quiet', '-B', order.work_branch, base]);
    for (const [p, text] of Object.entries(files)) {
      mkdirSync(dirname(join(work, p)), { recursive: true });
      writeFileSync(join(work, p), text);
    }
    host.git(work, ['add', '--all']);
    host.git(work, ['commit', '--quiet', '-m', 'work']);
    const commit = host.git(work, ['rev-parse', 'HEAD']).trim();
    const bundle = join(work, '..', `${order.work_branch.replace(/\//g, '-')}.bundle`);
    host.git(work, ['bundle', 'create', '--quiet', bundle, `${base}..${order.work_branch}`]);
    return { item, order, base, commit, bundle: readFileSync(bundle).toString('base64') };
  };
  /** The node's signed result: what it claims changed and ran. */
  const report = async (
    node: TestNode,
    w: Awaited<ReturnType<typeof commitWork>>,
    claim: { changed_paths: string[]; checks: string[] },
  ) => {
    const result: ExecuteResult = {
      mode: 'execute',
      base_branch: 'main',
      base_commit: w.base,
      work_branch: w.order.work_branch,
      commit_sha: w.commit,
      changed_paths: claim.changed_paths,
      diff: 'diff --git a/src/a.js b/src/a.js\n',
      diff_truncated: false,
      capsule: {
        exit_code: 0,
        timed_out: false,
        duration_ms: 5,
        output_sha256: sha256(''),
        output_tail: '',
        summary: null,
      },
      checks: claim.checks.map((command) => ({
        command,
        argv: command.split(' '),
        exit_code: 0,
        timed_out: false,
        duration_ms: 5,
        output_sha256: sha256('ok'),
        output_tail: 'ok',
      })),
      bundle_base64: w.bundle,
    };
    const res = await node.complete(w.item as WorkItem, JSON.stringify(result), 1);
    expect(res.statusCode, res.body).toBe(200);
  };
  const read = async (id: string, key = owner.apiKey) => (await api('GET', `/api/v1/work/orders/${id}`, key)).body;
  /** A new organization whose sign-up grant is confirmed as paid credit: its charges make payable earnings. */
  const payingBuyer = async () => {
    const buyer = await signUp(t.app);
    await t.ctx.ledger.confirmCredit(buyer.orgId, 500, { txType: 'topup_confirmed' });
    return buyer;
  };
  /** What the buyer holds and what the stranger (the operator) may be paid. */
  const money = async (buyer: TestBuyer) => ({
    buyer: await t.ctx.ledger.balance(buyer.orgId),
    payable: (await payableEarnings(t.ctx.db, stranger.orgId)).payable_cents,
  });
  const evidence = async (id: string, key: string) =>
    (await api('GET', `/api/v1/work/orders/${id}/evidence`, key)).body as unknown as {
      events: { event_type: string; metadata: Record<string, unknown> }[];
    };

  beforeAll(async () => {
    host = await startDumbGitHost();
    host.seed('acme/widgets', {
      'package.json': JSON.stringify({ name: 'widgets', scripts: { test: 'node test/run.js', lint: 'node -e 0' } }),
      'src/index.js': 'export const widgets = 1;\n',
      'test/run.js': "console.log('tests pass');\n",
    });
    repoUrl = host.url('acme/widgets');
    work = join(mkdtempSync(join(tmpdir(), 'svc-wo-sec-')), 'clone');
    host.git(tmpdir(), ['clone', '--quiet', join(host.root, 'acme/widgets.git'), work]);
    t = await createTestApp();
    owner = await signUp(t.app);
    ownNode = await createTestNode(t.app, await createKey(t.app, owner, ['operator']), {
      capabilities: ['cpu', 'capsule'],
    });
    stranger = await signUp(t.app);
    strangerNode = await createTestNode(t.app, await createKey(t.app, stranger, ['operator']), {
      capabilities: ['cpu', 'capsule'],
    });
  }, 120_000);

  afterAll(async () => {
    await t?.close();
    await host?.close();
    if (work) rmSync(dirname(work), { recursive: true, force: true });
  });

  it('fails an order whose node hides a changed .github workflow, names the node, and pushes nothing', async () => {
    const created = await createOrder(owner.apiKey);
    const w = await commitWork(ownNode, {
      'src/a.js': 'export const a = 1;\n',
      '.github/workflows/ci.yml': 'on: push\njobs: {}\n',
    });
    await report(ownNode, w, { changed_paths: ['src/a.js'], checks: ['npm test'] });
    const done = await read(created.id);
    expect(done.status).toBe('failed');
    expect(done.failure_reason).toBe(
      `node ${ownNode.nodeId} reported changed paths that differ from its commit ${w.commit}: changed but not reported: .github/workflows/ci.yml`,
    );
    expect(done.pr).toBeNull();
    expect(done.approvals).toEqual([]);
    const graph = (await api('GET', `/api/v1/work/orders/${created.id}/evidence`, owner.apiKey)).body as unknown as {
      events: { event_type: string; metadata: Record<string, unknown> }[];
    };
    const failed = graph.events.at(-1);
    expect(failed?.event_type).toBe('work_order.failed');
    expect(failed?.metadata).toMatchObject({
      node_id: ownNode.nodeId,
      reported_changed_paths: ['src/a.js'],
      changed_paths: ['.github/workflows/ci.yml', 'src/a.js'],
      unreported_paths: ['.github/workflows/ci.yml'],
    });
    expect(graph.events.map((e) => e.event_type)).not.toContain('approval.recorded');
    // The host was only read from: nothing was pushed.
    expect(host.requests.filter((r) => r.method !== 'GET')).toEqual([]);
  }, 60_000);

  it("matches a required check to the repository's own command: `echo test` does not satisfy `test`", async () => {
    const created = await createOrder(owner.apiKey);
    const w = await commitWork(ownNode, { 'src/b.js': 'export const b = 1;\n' });
    // The server tells the node which command `test` stands for: package.json's test script.
    expect(w.order.check_commands).toEqual([['npm', 'test']]);
    await report(ownNode, w, { changed_paths: ['src/b.js'], checks: ['echo test', 'node test/run.js'] });
    const done = await read(created.id);
    expect(done.status).toBe('blocked');
    expect(done.decision?.reasons).toEqual(['required check not run: test (npm test)']);
    expect(done.approvals).toEqual([]);
  }, 60_000);

  it("approves by policy a certified order from the organization's own node, separating its claim from what the server recomputed", async () => {
    const created = await createOrder(owner.apiKey);
    const w = await commitWork(ownNode, { 'src/c.js': 'export const c = 1;\n' });
    await report(ownNode, w, { changed_paths: ['src/c.js'], checks: ['npm test'] });
    const done = await read(created.id);
    // Approved by policy; the push then fails on this read-only host, and the order says why.
    expect(done.status).toBe('approved');
    expect(done.approvals).toEqual([expect.objectContaining({ by: 'policy' })]);
    expect(done.decision).toMatchObject({ certification: 'certified', node_id: ownNode.nodeId, node_trust: 'own' });
    expect(done.server_verified).toMatchObject({
      basis: 'recomputed by the server from the base and work bundles',
      changed_paths: ['src/c.js'],
      check_commands: [{ check: 'test', command: 'npm test' }],
    });
    expect(done.node_claim).toMatchObject({
      basis: "the node's signed claim: the server does not re-run checks",
      node_id: ownNode.nodeId,
      changed_paths: ['src/c.js'],
      checks: [expect.objectContaining({ command: 'npm test', exit_code: 0 })],
    });
    // The diff shown for review is the commit's, not the node's text.
    const diff = (await api('GET', `/api/v1/work/orders/${created.id}/diff`, owner.apiKey)).body as unknown as {
      diff: string;
    };
    expect(diff.diff).toContain('+export const c = 1;');
  }, 60_000);

  it("holds a certified order from a stranger's node (not attested) for a person", async () => {
    const created = await createOrder(owner.apiKey);
    const w = await commitWork(strangerNode, { 'src/d.js': 'export const d = 1;\n' });
    await report(strangerNode, w, { changed_paths: ['src/d.js'], checks: ['npm test'] });
    const done = await read(created.id);
    expect(done.status).toBe('certified');
    expect(done.approvals).toEqual([]);
    expect(done.decision).toMatchObject({ auto_approve: false, node_id: strangerNode.nodeId, node_trust: 'untrusted' });
    expect(done.decision?.reasons.at(-1)).toBe(
      `not approved automatically: node ${strangerNode.nodeId} is neither the organization's own nor a verified TEE node, and its check results are its claim; an owner or admin decides`,
    );
  }, 60_000);

  it('refuses a member trust tier certified (403); a member order waits for an owner or admin', async () => {
    const invite = await api('POST', '/api/v1/organizations/current/invites', owner.apiKey, {
      email: `member-${Date.now()}@example.test`,
      role: 'member',
    });
    expect(invite.status, JSON.stringify(invite.body)).toBe(201);
    const accepted = await t.app.inject({
      method: 'POST',
      url: '/api/v1/organizations/invites/accept',
      payload: { token: invite.body.invite_token, password: 'member password!' },
    });
    const member = String((accepted.json() as { token: string }).token);
    const refused = await api('POST', '/api/v1/work/orders', member, {
      goal: 'anything',
      repository_url: repoUrl,
      policy_preset: 'custom',
      allowed_paths: ['**'],
      trust_tier: 'certified',
    });
    expect(refused.status).toBe(403);
    expect(refused.body.message).toBe(
      "only owners and admins can choose trust tier certified (approved without a person); a member's order runs under reviewed and waits for an owner or admin",
    );
    const created = await createOrder(member, { policy_preset: 'custom', allowed_paths: ['**'] });
    expect(created.trust_tier).toBe('reviewed');
    const w = await commitWork(ownNode, { 'src/e.js': 'export const e = 1;\n' });
    await report(ownNode, w, { changed_paths: ['src/e.js'], checks: [] });
    const done = await read(created.id, member);
    expect(done).toMatchObject({ status: 'certified', approvals: [] });
    expect((await api('POST', `/api/v1/work/orders/${created.id}/approve`, member, {})).status).toBe(403);
  }, 60_000);
  it("reverses the charge of an order whose node reported a commit its bundle does not hold: the buyer is refunded, the operator's earning never becomes payable, the node loses reputation", async () => {
    const buyer = await payingBuyer();
    const before = await money(buyer);
    const reputation = (await findNode(t.ctx.db, strangerNode.nodeId))?.reputation ?? 0;
    const created = await createOrder(buyer.apiKey);
    const w = await commitWork(strangerNode, { 'src/f.js': 'export const f = 1;\n' });
    const claimed = 'f'.repeat(40);
    await report(strangerNode, { ...w, commit: claimed }, { changed_paths: ['src/f.js'], checks: ['npm test'] });
    const done = await read(created.id, buyer.apiKey);
    expect(done.status).toBe('failed');
    expect(done.failure_reason).toBe(
      `node ${strangerNode.nodeId}'s work bundle does not hold what it reported: the work bundle's ${w.order.work_branch} is ${w.commit}, the certified commit is ${claimed}`,
    );
    const jobId = String(done.job_id);
    // Charged 10 cents (the node's price for one run) on its receipt, then refunded: as before the job.
    expect(await money(buyer)).toEqual(before);
    const rows = await ledgerOfRefAllOrgs(t.ctx.db, jobId);
    expect(rows.map((r) => [r.tx_type, r.amount_cents, r.amount_micro])).toEqual([
      ['hold', 0, 0],
      ['charge', -10, -100_000],
      ['release', 0, 0],
      ['earning', 8, 85_000],
      ['refund', 10, 100_000],
      ['earning_reversal', -8, -85_000],
    ]);
    expect((await findNode(t.ctx.db, strangerNode.nodeId))?.reputation).toBe(reputation - REFUSED_RECEIPT_PENALTY);
    const graph = await evidence(created.id, buyer.apiKey);
    expect(graph.events.map((e) => e.event_type).slice(-3)).toEqual([
      'capsule.finished',
      'ledger.reversed',
      'work_order.failed',
    ]);
    expect(graph.events.at(-2)?.metadata).toMatchObject({
      job_id: jobId,
      refunded_cents: 10,
      refunds: [expect.objectContaining({ tx_type: 'refund', amount_cents: 10 })],
      earning_reversals: [expect.objectContaining({ tx_type: 'earning_reversal', amount_cents: -8 })],
      owed_cents: 0,
    });
    expect(graph.events.at(-1)?.metadata).toMatchObject({
      node_id: strangerNode.nodeId,
      problem: 'bundle_mismatch',
      node_reputation: reputation - REFUSED_RECEIPT_PENALTY,
    });
    // Synced again (the order row as it was while running, and the ledger asked directly): nothing more.
    const stored = await findOrder(t.ctx.db, buyer.orgId, created.id);
    if (!stored) throw new Error('the order is gone');
    await syncOrder(t.ctx, { ...stored, status: 'running' });
    expect(await t.ctx.ledger.reverse(jobId, { description: 'again' })).toBeUndefined();
    expect(await ledgerOfRefAllOrgs(t.ctx.db, jobId)).toHaveLength(rows.length);
    expect(await money(buyer)).toEqual(before);
    expect((await evidence(created.id, buyer.apiKey)).events).toHaveLength(graph.events.length);
    expect((await findNode(t.ctx.db, strangerNode.nodeId))?.reputation).toBe(reputation - REFUSED_RECEIPT_PENALTY);
  }, 60_000);

  it('still charges and pays an honest order: no reversal, the operator earns', async () => {
    const buyer = await payingBuyer();
    const before = await money(buyer);
    const reputation = (await findNode(t.ctx.db, strangerNode.nodeId))?.reputation;
    const created = await createOrder(buyer.apiKey);
    const w = await commitWork(strangerNode, { 'src/g.js': 'export const g = 1;\n' });
    await report(strangerNode, w, { changed_paths: ['src/g.js'], checks: ['npm test'] });
    const done = await read(created.id, buyer.apiKey);
    expect(done.status).toBe('certified');
    const after = await money(buyer);
    expect(after.buyer.balance_cents).toBe(before.buyer.balance_cents - 10);
    expect(after.payable).toBe(before.payable + 8);
    const rows = await ledgerOfRefAllOrgs(t.ctx.db, String(done.job_id));
    expect(rows.map((r) => r.tx_type)).toEqual(['hold', 'charge', 'release', 'earning']);
    expect((await evidence(created.id, buyer.apiKey)).events.map((e) => e.event_type)).not.toContain('ledger.reversed');
    expect((await findNode(t.ctx.db, strangerNode.nodeId))?.reputation).toBe(reputation);
  }, 60_000);
});

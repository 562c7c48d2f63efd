import { createHash } from 'node:crypto';
import { findModel, type ExecuteResult, type RepositoryWorkPayload } from '@svc/protocol';
import type { Static } from '@sinclair/typebox';
import type { ServiceContext } from '../../service-context.js';
import type { Queryable } from '../../platform/db/index.js';
import { ApiError } from '../../platform/errors.js';
import { newId } from '../../platform/ids.js';
import { requireManager, type Principal } from '../../platform/principal.js';
import { policyEvaluated, policyId } from '../evidence/events.js';
import { closeRun, openRun, recordEvents, type EvidenceEvent } from '../evidence/recorder.js';
import { submitRepositoryJob, withRepositoryJobCredit } from '../jobs/service.js';
import { findJobById } from '../jobs/store.js';
import { receiptsOfJob } from '../receipts/store.js';
import { GitError, pushWorkBranch, rollBack } from './git.js';
import { nodeTrustOf, recompute } from './recompute.js';
import { answerFalseReport } from './false-report.js';
import { closePullRequest, hostRepoOf, openChangeRequest } from './host.js';
import { BASIS, certify, checkCommandsFor, expandPolicy, type TrustTier } from './policy.js';
import { checkRepositoryUrl, getRepository, remoteOf, stageBaseBundle } from './repositories.js';
import type { CreateWorkOrderRequest } from './schemas.js';
import { canMove, isExecuting, type WorkOrderStatus } from './states.js';
import * as store from './store.js';
import { readWorkResult } from '../work/results.js';

const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');
const rollbackSubject = (id: string) => `${id}.rollback`;

export function orderView(o: store.OrderRow) {
  const s = o.spec;
  return {
    id: o.id,
    status: o.status,
    goal: s.goal,
    title: s.title,
    architecture_plan: s.architecture_plan,
    jurisdiction: s.jurisdiction,
    repository_url: s.repository_url,
    repository_connection_id: o.repository_id,
    site_url: s.site_url,
    base_branch: s.base_branch,
    work_branch: s.work_branch,
    trust_tier: s.trust_tier,
    policy_preset: s.policy_preset,
    allowed_paths: s.allowed_paths,
    forbidden_paths: s.forbidden_paths,
    required_checks: s.required_checks,
    model: s.model,
    decision: o.decision as Record<string, unknown> | null,
    job_id: o.job_id,
    base_commit: o.base_commit,
    commit_sha: o.commit_sha,
    changed_paths: o.result?.changed_paths ?? [],
    checks: checksView(o.result?.checks ?? []),
    approvals: o.approvals,
    pr_url: typeof o.pr?.url === 'string' ? o.pr.url : null,
    pr: o.pr,
    rollback_point: o.base_commit,
    rollback: o.rollback,
    failure_reason: o.failure_reason,
    ...resultSides(o),
    evidence_path: `/api/v1/work/orders/${o.id}/evidence`,
    created_at: o.created_at.toISOString(),
    updated_at: o.updated_at.toISOString(),
  };
}

/** The checks as the node reported them, without their output tails. */
const checksView = (checks: store.StoredResult['checks']) =>
  checks.map((c) => ({
    command: c.command,
    exit_code: c.exit_code,
    timed_out: c.timed_out,
    output_sha256: c.output_sha256,
    duration_ms: c.duration_ms,
  }));

/**
 * The result's two sides, kept apart: what the server recomputed from the bundles, and what the
 * node reported and signed (its checks above all, which the server cannot re-run).
 */
function resultSides(o: store.OrderRow) {
  const r = o.result;
  if (!r) return { server_verified: null, node_claim: null };
  return {
    server_verified: {
      basis: BASIS.changed_paths,
      base_commit: o.base_commit,
      commit_sha: o.commit_sha,
      changed_paths: r.changed_paths,
      diff_sha256: r.diff_sha256,
      diff_truncated: r.diff_truncated,
      check_commands: (o.spec.check_commands ?? []).map(({ check, command }) => ({ check, command })),
    },
    node_claim: {
      basis: BASIS.checks,
      node_id: r.node_id,
      result_hash: r.result_hash,
      receipt_id: r.receipt_id,
      changed_paths: r.reported_changed_paths ?? null,
      diff_sha256: r.reported_diff_sha256 ?? null,
      checks: checksView(r.checks),
      capsule: r.capsule,
    },
  };
}

/**
 * The trust tier an order runs under. Only owners and admins may let orders be approved without
 * a person: a member's order defaults to `reviewed`, and a member asking for `certified` is refused.
 */
function trustTierOf(principal: Principal, asked: TrustTier | undefined): TrustTier {
  const manager = principal.role === 'owner' || principal.role === 'admin';
  if (asked === 'certified' && !manager)
    throw new ApiError(
      'forbidden',
      "only owners and admins can choose trust tier certified (approved without a person); a member's order runs under reviewed and waits for an owner or admin",
    );
  return asked ?? (manager ? 'certified' : 'reviewed');
}

const bad = (path: string, message: string) =>
  new ApiError('invalid_request', `${path.slice(1)} ${message}`, [{ path, message }]);

/**
 * Creates a work order: resolves the repository (a saved connection, or a public URL), expands
 * the preset, fetches the base branch for the node, and queues its kind 9 job; the order's
 * evidence run opens with it.
 */
export async function createOrder(
  ctx: ServiceContext,
  principal: Principal,
  body: Static<typeof CreateWorkOrderRequest>,
) {
  if (!body.repository_connection_id && !body.repository_url)
    throw bad('/repository_url', 'or repository_connection_id is required');
  const repo = body.repository_connection_id
    ? await getRepository(ctx, principal, body.repository_connection_id)
    : null;
  if (repo && body.repository_url && body.repository_url !== repo.repository_url)
    throw bad('/repository_url', "differs from the connection's repository_url");
  const repositoryUrl = repo?.repository_url ?? body.repository_url ?? '';
  const trustTier = trustTierOf(principal, body.trust_tier);
  const remote = await remoteOf(ctx, repo, repositoryUrl);
  if (body.site_url) await checkRepositoryUrl(ctx, body.site_url, '/site_url');
  if (body.model !== undefined && findModel(body.model)?.type !== 'chat')
    throw bad('/model', 'must be a chat model of the catalogue (GET /v1/models)');
  const id = newId('wo');
  const preset = body.policy_preset ?? 'custom';
  const policy = expandPolicy(preset, {
    allowed_paths: body.allowed_paths,
    forbidden_paths: body.forbidden_paths,
    required_checks: body.required_checks,
  });
  const base = body.base_branch ?? repo?.default_branch ?? 'main';
  const workBranch = body.work_branch ?? `svc/${id}`;
  if (workBranch === base) throw bad('/work_branch', 'must differ from base_branch');
  const timeout = body.timeout_seconds ?? 900;
  const staged = await stageBaseBundle(ctx, remote, base, `wob-${id}.bundle`, timeout, '/base_branch');
  // Required checks stand for commands of the base commit's own tooling, never a capsule's choice.
  const checks = checkCommandsFor(policy.required_checks, staged.tooling);
  const spec: store.OrderSpec = {
    goal: body.goal,
    title: body.title ?? null,
    architecture_plan: body.architecture_plan ?? null,
    jurisdiction: body.jurisdiction ?? null,
    repository_url: repositoryUrl,
    site_url: body.site_url ?? null,
    base_branch: base,
    work_branch: workBranch,
    trust_tier: trustTier,
    policy_preset: preset,
    ...policy,
    model: body.model ?? null,
    requires_tee: body.requires_tee ?? false,
    timeout_seconds: timeout,
    base_bundle_key: staged.key,
    check_commands: checks.commands,
    check_files: staged.tooling.files,
  };
  const payload: RepositoryWorkPayload = {
    mode: 'execute',
    bundle_url: staged.url,
    base_branch: base,
    base_commit: staged.commit,
    timeout_seconds: timeout,
    order: {
      work_order_id: id,
      goal: spec.goal,
      title: spec.title,
      architecture_plan: spec.architecture_plan,
      model: spec.model,
      base_branch: base,
      work_branch: workBranch,
      allowed_paths: policy.allowed_paths,
      forbidden_paths: policy.forbidden_paths,
      required_checks: policy.required_checks,
      tooling: { package_managers: [], test_commands: [], files: [] },
      check_commands: checks.commands.map((c) => c.argv),
    },
  };
  const snapshot = {
    policy_preset: preset,
    trust_tier: spec.trust_tier,
    ...policy,
    jurisdiction: spec.jurisdiction,
    requires_tee: spec.requires_tee,
    base_branch: base,
    work_branch: workBranch,
  };
  const open = () =>
    ctx.db.transaction(async (tx) => {
      const job = await submitRepositoryJob(ctx, tx, principal, {
        payload: { ...payload },
        strict_jurisdiction: spec.jurisdiction,
        requires_tee: spec.requires_tee,
        timeout_seconds: timeout,
      });
      const row = await store.insertOrder(tx, {
        id,
        org_id: principal.orgId,
        buyer_id: principal.buyerId,
        repository_id: repo?.id ?? null,
        spec,
        job_id: job.id,
        base_commit: staged.commit,
      });
      await openRun(
        tx,
        {
          org_id: principal.orgId,
          buyer_id: principal.buyerId,
          subject_type: 'work_order',
          job_id: id,
          summary: 'work order, open',
          jurisdiction: spec.jurisdiction,
          policy_id: policyId(snapshot),
          trust_tier: spec.trust_tier,
          work_type: 'repository_work',
        },
        [
          {
            type: 'work_order.created',
            summary: `work order created by ${principal.buyerId}: ${(spec.title ?? spec.goal).slice(0, 200)}`,
            metadata: {
              goal_sha256: sha256(spec.goal),
              title: spec.title,
              repository_url: repositoryUrl,
              repository_connection_id: repo?.id ?? null,
              model: spec.model,
            },
          },
          policyEvaluated(
            snapshot,
            `preset ${preset}, trust tier ${spec.trust_tier}: ${policy.allowed_paths.length} allowed globs, ${policy.forbidden_paths.length} forbidden, checks ${policy.required_checks.join(', ') || 'none'}`,
          ),
          {
            type: 'preflight.completed',
            summary: `${base} fetched at ${staged.commit}: the rollback point`,
            metadata: { base_branch: base, base_commit: staged.commit },
            causedBy: ['work_order.created'],
          },
          {
            type: 'capsule.queued',
            summary: `kind 9 job ${job.id} queued for a node with a capsule`,
            metadata: { job_id: job.id, strict_jurisdiction: spec.jurisdiction, requires_tee: spec.requires_tee },
            causedBy: ['policy.evaluated'],
          },
        ],
      );
      return row;
    });
  // The job's budget comes from the credit reservation (402 decided in memory) before the transaction.
  const queue = () => withRepositoryJobCredit(ctx, principal.orgId, open);
  // The bundle is only useful with its order: a refusal (402 for credits) leaves nothing behind.
  const order = await queue().catch(async (err: unknown) => {
    await ctx.blobs.delete(staged.key);
    throw err;
  });
  await ctx.bus.publish('jobs', order.job_id ?? '');
  return orderView(order);
}

/** A work order of the caller's organization, its job's outcome applied first. */
export async function loadOrder(
  ctx: ServiceContext,
  principal: Pick<Principal, 'orgId'>,
  id: string,
): Promise<store.OrderRow> {
  const order = await store.findOrder(ctx.db, principal.orgId, id);
  if (!order) throw new ApiError('not_found', `work order ${id} not found`);
  return isExecuting(order.status) ? syncOrder(ctx, order) : order;
}

function executeResultOf(bytes: Buffer): ExecuteResult | undefined {
  try {
    const parsed = JSON.parse(bytes.toString('utf8')) as ExecuteResult;
    return parsed.mode === 'execute' && Array.isArray(parsed.changed_paths) && Array.isArray(parsed.checks)
      ? parsed
      : undefined;
  } catch {
    return undefined;
  }
}

async function finishRun(
  ctx: ServiceContext,
  tx: Queryable,
  id: string,
  events: readonly EvidenceEvent[],
  status: string,
) {
  await closeRun(tx, ctx.secrets, id, events, `work order, ${status}`);
}

/**
 * Applies the order's job to the order: running -> `running`; completed -> the result
 * certified (`certified`, `needs_review` or `blocked`; `failed` when the capsule failed, or when
 * the server's recomputation proves the node's report false: then the job's charge is reversed,
 * false-report.ts); failed or cancelled -> `failed`. A certified order under the `certified`
 * trust tier is approved by policy and its pull request opened. Idempotent; the order row is
 * locked.
 */
export async function syncOrder(ctx: ServiceContext, order: store.OrderRow): Promise<store.OrderRow> {
  if (!order.job_id || !isExecuting(order.status)) return order;
  const jobId = order.job_id;
  const job = await findJobById(ctx.db, jobId);
  if (!job || ['pending', 'submitted'].includes(job.status)) return order;
  const blob = job.status === 'completed' && job.work_id ? await readWorkResult(ctx, job.work_id) : undefined;
  const receipt = job.status === 'completed' ? (await receiptsOfJob(ctx.db, order.org_id, jobId))[0] : undefined;
  const result = blob ? executeResultOf(blob.bytes) : undefined;
  // Read and recomputed outside the transaction: git runs on the bundles (idempotent, no remote).
  const recomputed =
    result && result.capsule.exit_code === 0 && !result.capsule.timed_out
      ? await recompute(ctx, order, result, job.node_id)
      : undefined;
  const trust = await nodeTrustOf(ctx, order.org_id, job.node_id);
  let approvedHere = false;
  const updated = await ctx.db.transaction(async (tx) => {
    const current = await store.findOrder(tx, order.org_id, order.id, true);
    if (!current || !isExecuting(current.status)) return current ?? order;
    let row = current;
    if (row.status === 'queued') {
      row = (await store.updateOrder(tx, row.id, 'queued', { status: 'running' })) ?? row;
      await recordEvents(tx, row.id, [
        {
          type: 'capsule.started',
          summary: `node ${job.node_id ?? 'unknown'} took job ${jobId}`,
          metadata: { job_id: jobId, node_id: job.node_id },
          causedBy: ['capsule.queued'],
        },
      ]);
    }
    if (job.status === 'failed' || job.status === 'cancelled') {
      const failed = await store.updateOrder(tx, row.id, 'running', {
        status: 'failed',
        failure_reason: `the job ${job.status}: ${job.failure_reason ?? 'no reason given'}`,
      });
      await finishRun(
        ctx,
        tx,
        row.id,
        [
          {
            type: 'work_order.failed',
            summary: `job ${jobId} ${job.status}`,
            metadata: { job_id: jobId, reason: job.failure_reason },
            causedBy: ['capsule.started'],
          },
        ],
        'failed',
      );
      return failed ?? row;
    }
    if (job.status !== 'completed') return row;
    const finished: EvidenceEvent = {
      type: 'capsule.finished',
      summary: result
        ? `capsule exited ${String(result.capsule.exit_code)}${result.capsule.timed_out ? ' (time limit)' : ''}`
        : 'the node returned no work result',
      metadata: {
        job_id: jobId,
        node_id: job.node_id,
        result_hash: job.result_hash,
        receipt_id: receipt?.id ?? null,
        node_public_key: receipt?.node_public_key ?? null,
        exit_code: result?.capsule.exit_code ?? null,
        timed_out: result?.capsule.timed_out ?? null,
        output_sha256: result?.capsule.output_sha256 ?? null,
      },
      causedBy: ['capsule.started'],
    };
    if (!result || !recomputed || 'problem' in recomputed) {
      let reason: string;
      if (!result) reason = 'the node returned no work result';
      else if (recomputed && 'problem' in recomputed) reason = recomputed.problem;
      else
        reason = `the capsule ${result.capsule.timed_out ? 'ran out of time' : `exited ${String(result.capsule.exit_code)}`}`;
      const failed = await store.updateOrder(tx, row.id, 'running', { status: 'failed', failure_reason: reason });
      const problem = recomputed && 'problem' in recomputed ? recomputed : undefined;
      // A report proven false is not paid for: the job's charge is reversed with the failure.
      const answer = problem
        ? await answerFalseReport(ctx.ledger, tx, { jobId, nodeId: job.node_id, problem })
        : { events: [], reputation: null };
      const detail = problem
        ? {
            node_id: job.node_id,
            problem: problem.kind,
            ...problem.metadata,
            ...(answer.reputation === null ? {} : { node_reputation: answer.reputation }),
          }
        : {};
      await finishRun(
        ctx,
        tx,
        row.id,
        [
          finished,
          ...answer.events,
          {
            type: 'work_order.failed',
            summary: reason.slice(0, 400),
            metadata: { job_id: jobId, ...detail },
            causedBy: ['capsule.finished'],
          },
        ],
        'failed',
      );
      return failed ?? row;
    }
    const work = recomputed.work;
    const workBundleKey = result.bundle_base64 ? `work-orders/${row.id}/work.bundle` : null;
    if (workBundleKey && result.bundle_base64)
      await ctx.blobs
        .within(tx)
        .put(workBundleKey, Buffer.from(result.bundle_base64, 'base64'), 'application/x-git-bundle');
    const spec = row.spec;
    const decision = certify({
      policy: spec,
      changedPaths: work.changed_paths,
      checks: result.checks,
      commands: spec.check_commands ?? [],
      checkFiles: spec.check_files ?? [],
      trustTier: spec.trust_tier,
      node: { id: job.node_id, trust },
    });
    const stored: store.StoredResult = {
      changed_paths: work.changed_paths,
      diff: work.diff,
      diff_truncated: work.diff_truncated,
      diff_sha256: sha256(work.diff),
      reported_changed_paths: result.changed_paths,
      reported_diff_sha256: sha256(result.diff),
      checks: result.checks,
      capsule: { ...result.capsule },
      result_hash: job.result_hash ?? '',
      receipt_id: receipt?.id ?? null,
      node_id: job.node_id,
      work_bundle_key: workBundleKey,
    };
    const status: WorkOrderStatus = decision.certification;
    const next = await store.updateOrder(tx, row.id, 'running', {
      status,
      decision,
      commit_sha: result.commit_sha,
      result: stored,
    });
    const events: EvidenceEvent[] = [
      finished,
      ...result.checks.map((c): EvidenceEvent => ({
        type: 'check.executed',
        summary: `node ${job.node_id ?? 'unknown'} reports: ${c.command} exited ${String(c.exit_code)}`,
        metadata: {
          command: c.command,
          exit_code: c.exit_code,
          timed_out: c.timed_out,
          output_sha256: c.output_sha256,
          basis: BASIS.checks,
          node_id: job.node_id,
        },
        causedBy: ['capsule.finished'],
      })),
      {
        type: 'diff.produced',
        summary: `${work.changed_paths.length} paths changed in ${result.commit_sha ?? 'no commit'} (recomputed by the server)`,
        metadata: {
          base_commit: row.base_commit,
          commit_sha: result.commit_sha,
          changed_paths: work.changed_paths,
          diff_sha256: stored.diff_sha256,
          diff_truncated: work.diff_truncated,
          basis: BASIS.changed_paths,
          reported_changed_paths: result.changed_paths,
          reported_diff_sha256: stored.reported_diff_sha256,
        },
        causedBy: ['capsule.finished'],
      },
      {
        type: 'certification.decided',
        summary: `${decision.certification}: ${decision.reasons.join('; ').slice(0, 400)}`,
        metadata: { ...decision },
        causedBy: ['diff.produced', 'policy.evaluated'],
      },
    ];
    if (status === 'blocked') await finishRun(ctx, tx, row.id, events, 'blocked');
    else await recordEvents(tx, row.id, events);
    if (next && decision.auto_approve) {
      const approval: store.Approval = {
        decision: 'approved',
        by: 'policy',
        role: 'policy',
        reason: `certified under trust tier ${spec.trust_tier}, run by node ${job.node_id ?? 'unknown'} (${trust})`,
        at: new Date().toISOString(),
      };
      const approved = await store.updateOrder(tx, row.id, 'certified', {
        status: 'approved',
        approvals: [...next.approvals, approval],
      });
      await recordEvents(tx, row.id, [
        {
          type: 'approval.recorded',
          summary: `approved automatically: certified under the certified trust tier, node ${job.node_id ?? 'unknown'} trusted (${trust})`,
          metadata: { ...approval },
          causedBy: ['certification.decided'],
        },
      ]);
      approvedHere = approved !== undefined;
      return approved ?? next;
    }
    return next ?? row;
  });
  // Only the call that approved it opens the pull request (a concurrent reader sees `approved`).
  return approvedHere ? openPullRequest(ctx, updated) : updated;
}

/** Orders whose pull request this process is opening: a second call for one of them waits for nothing and returns. */
const opening = new Set<string>();

/** Pushes the certified commit and opens the pull request (or compare URL); stays `approved` with `failure_reason` when the host refuses. */
async function openPullRequest(ctx: ServiceContext, order: store.OrderRow): Promise<store.OrderRow> {
  if (opening.has(order.id)) return order;
  opening.add(order.id);
  try {
    return await pushAndOpen(ctx, order);
  } finally {
    opening.delete(order.id);
  }
}

async function pushAndOpen(ctx: ServiceContext, order: store.OrderRow): Promise<store.OrderRow> {
  const spec = order.spec;
  try {
    if (!order.commit_sha || !order.result?.work_bundle_key) throw new GitError('there is no commit to push');
    const repo = order.repository_id
      ? await getRepository(ctx, { orgId: order.org_id } as Principal, order.repository_id).catch(() => null)
      : null;
    const remote = await remoteOf(ctx, repo, spec.repository_url);
    const [base, work] = await Promise.all([
      ctx.blobs.get(spec.base_bundle_key),
      ctx.blobs.get(order.result.work_bundle_key),
    ]);
    if (!base || !work) throw new GitError('the bundles of this order are no longer stored');
    await pushWorkBranch(remote, {
      baseBundle: base.bytes,
      workBundle: work.bytes,
      workBranch: spec.work_branch,
      commit: order.commit_sha,
    });
    const body = `${spec.goal}\n\n---\nSVC work order ${order.id}: ${order.decision?.certification ?? 'approved'}; rollback point ${order.base_commit ?? ''}.\nEvidence: ${ctx.config.publicUrl}/api/v1/work/orders/${order.id}/evidence/bundle`;
    const pr = await openChangeRequest(
      ctx.config,
      ctx.egress,
      hostRepoOf(ctx.config, spec.repository_url),
      remote.token,
      {
        branch: spec.work_branch,
        base: spec.base_branch,
        title: spec.title ?? spec.goal.slice(0, 100),
        body,
      },
    );
    return await ctx.db.transaction(async (tx) => {
      const opened = await store.updateOrder(tx, order.id, 'approved', {
        status: 'pr_opened',
        pr: { ...pr },
        failure_reason: null,
      });
      if (!opened) return order;
      await finishRun(
        ctx,
        tx,
        order.id,
        [
          {
            type: 'pr.opened',
            summary: `${pr.kind === 'pull_request' ? `pull request #${String(pr.number)}` : 'branch pushed'}: ${pr.url}`,
            metadata: { ...pr, commit_sha: order.commit_sha },
            causedBy: ['approval.recorded'],
          },
        ],
        'pr_opened',
      );
      return opened;
    });
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    ctx.log.warn({ work_order_id: order.id, reason }, 'work order: push or pull request failed');
    return (
      (await store.updateOrder(ctx.db, order.id, 'approved', {
        failure_reason: `the pull request could not be opened: ${reason}`.slice(0, 1000),
      })) ?? order
    );
  }
}

/**
 * An owner's or admin's decision on a certified or needs-review order (409 otherwise). Approving
 * pushes the branch and opens the pull request; approving an approved order whose pull request
 * failed tries it again.
 */
export async function decide(
  ctx: ServiceContext,
  principal: Principal,
  id: string,
  decision: 'approved' | 'rejected',
  reason: string | undefined,
) {
  requireManager(principal, `${decision === 'approved' ? 'approve' : 'reject'} work orders`);
  const order = await loadOrder(ctx, principal, id);
  if (decision === 'approved' && order.status === 'approved' && !order.pr)
    return orderView(await openPullRequest(ctx, order));
  const updated = await ctx.db.transaction(async (tx) => {
    const current = await store.findOrder(tx, principal.orgId, id, true);
    if (!current) throw new ApiError('not_found', `work order ${id} not found`);
    if (!canMove(current.status, decision))
      throw new ApiError('conflict', `work order ${id} is ${current.status}; it cannot be ${decision}`);
    const approval: store.Approval = {
      decision,
      by: principal.buyerId,
      role: principal.role,
      reason: reason ?? null,
      at: new Date().toISOString(),
    };
    const next = await store.updateOrder(tx, id, current.status, {
      status: decision,
      approvals: [...current.approvals, approval],
    });
    if (!next) throw new ApiError('conflict', `work order ${id} changed state; try again`);
    const event: EvidenceEvent = {
      type: 'approval.recorded',
      summary: `${decision} by ${principal.buyerId} (${principal.role})${reason ? `: ${reason.slice(0, 200)}` : ''}`,
      metadata: { ...approval },
      causedBy: ['certification.decided'],
    };
    if (decision === 'rejected') await finishRun(ctx, tx, id, [event], 'rejected');
    else await recordEvents(tx, id, [event]);
    return next;
  });
  return orderView(updated.status === 'approved' ? await openPullRequest(ctx, updated) : updated);
}

/**
 * Rolls an opened order back to its rollback point (the base commit): a revert branch and pull
 * request when the change reached the base branch, else the work branch withdrawn and its pull
 * request closed. Recorded in a run of its own (`<order id>.rollback`), signed at once.
 */
export async function rollbackOrder(ctx: ServiceContext, principal: Principal, id: string, reason: string | undefined) {
  requireManager(principal, 'roll work orders back');
  const order = await loadOrder(ctx, principal, id);
  if (!canMove(order.status, 'rolled_back'))
    throw new ApiError(
      'conflict',
      `work order ${id} is ${order.status}; only an order with an opened pull request can be rolled back`,
    );
  const spec = order.spec;
  const repo = order.repository_id ? await getRepository(ctx, principal, order.repository_id).catch(() => null) : null;
  const remote = await remoteOf(ctx, repo, spec.repository_url);
  const [base, work] = await Promise.all([
    ctx.blobs.get(spec.base_bundle_key),
    order.result?.work_bundle_key ? ctx.blobs.get(order.result.work_bundle_key) : undefined,
  ]);
  if (!base || !work || !order.commit_sha || !order.base_commit)
    throw new ApiError('conflict', `work order ${id} has no stored commit to roll back`);
  const rollbackBranch = `${spec.work_branch}-rollback`;
  let outcome: Awaited<ReturnType<typeof rollBack>>;
  let pr: Awaited<ReturnType<typeof openChangeRequest>> | null = null;
  const host = hostRepoOf(ctx.config, spec.repository_url);
  try {
    outcome = await rollBack(remote, {
      baseBundle: base.bytes,
      workBundle: work.bytes,
      baseBranch: spec.base_branch,
      baseCommit: order.base_commit,
      commit: order.commit_sha,
      workBranch: spec.work_branch,
      rollbackBranch,
    });
    if (outcome.outcome === 'reverted') {
      pr = await openChangeRequest(ctx.config, ctx.egress, host, remote.token, {
        branch: rollbackBranch,
        base: spec.base_branch,
        title: `Revert: ${spec.title ?? spec.goal.slice(0, 90)}`,
        body: `Rolls SVC work order ${id} back to ${order.base_commit}.${reason ? `\n\n${reason}` : ''}`,
      });
    } else if (typeof order.pr?.number === 'number') {
      await closePullRequest(ctx.config, ctx.egress, host, remote.token, order.pr.number);
    }
  } catch (err) {
    throw new ApiError(
      'upstream_error',
      `the rollback could not be pushed: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
  const rollback = {
    outcome: outcome.outcome,
    rollback_point: order.base_commit,
    branch: outcome.outcome === 'reverted' ? rollbackBranch : null,
    revert_commit: outcome.outcome === 'reverted' ? outcome.revert_commit : null,
    pr,
    by: principal.buyerId,
    reason: reason ?? null,
    at: new Date().toISOString(),
    evidence_subject: rollbackSubject(id),
  };
  const updated = await ctx.db.transaction(async (tx) => {
    const next = await store.updateOrder(tx, id, 'pr_opened', { status: 'rolled_back', rollback });
    if (!next) throw new ApiError('conflict', `work order ${id} changed state; try again`);
    await openRun(
      tx,
      {
        org_id: principal.orgId,
        buyer_id: principal.buyerId,
        subject_type: 'work_order',
        job_id: rollbackSubject(id),
        summary: 'work order rollback',
        jurisdiction: spec.jurisdiction,
        policy_id: policyId({ work_order_id: id, rollback_point: order.base_commit }),
        trust_tier: spec.trust_tier,
        work_type: 'repository_work',
      },
      [
        {
          type: 'rollback.requested',
          summary: `rollback of ${id} to ${order.base_commit} by ${principal.buyerId}`,
          metadata: {
            work_order_id: id,
            rollback_point: order.base_commit,
            commit_sha: order.commit_sha,
            by: principal.buyerId,
            reason: reason ?? null,
          },
        },
      ],
    );
    await closeRun(
      tx,
      ctx.secrets,
      rollbackSubject(id),
      [
        {
          type: `rollback.${outcome.outcome}`,
          summary:
            outcome.outcome === 'reverted'
              ? `revert ${rollback.revert_commit ?? ''} pushed as ${rollbackBranch}${pr ? `: ${pr.url}` : ''}`
              : 'the change never reached the base branch: work branch withdrawn',
          metadata: { ...rollback },
          causedBy: ['rollback.requested'],
        },
      ],
      'work order rollback, signed',
    );
    return next;
  });
  return orderView(updated);
}

export async function listOrders(
  ctx: ServiceContext,
  principal: Principal,
  q: { status?: WorkOrderStatus; limit?: number; offset?: number },
) {
  const limit = q.limit ?? 50;
  const offset = q.offset ?? 0;
  const { rows, total } = await store.listOrders(ctx.db, principal.orgId, { status: q.status, limit, offset });
  const synced = await Promise.all(rows.map((r) => (isExecuting(r.status) ? syncOrder(ctx, r) : r)));
  return { orders: synced.map(orderView), total, limit, offset };
}

export async function orderDiff(ctx: ServiceContext, principal: Principal, id: string) {
  const o = await loadOrder(ctx, principal, id);
  return {
    id: o.id,
    base_commit: o.base_commit,
    commit_sha: o.commit_sha,
    changed_paths: o.result?.changed_paths ?? [],
    diff: o.result?.diff ?? '',
    diff_truncated: o.result?.diff_truncated ?? false,
    diff_sha256: o.result?.diff_sha256 ?? null,
  };
}

/** Orders whose job may have moved on, for the background sweep (every organization). */
export async function syncExecutingOrders(ctx: ServiceContext): Promise<number> {
  const { rows } = await ctx.db.query<store.OrderRow>(
    "SELECT * FROM work_orders WHERE status IN ('queued', 'running') ORDER BY updated_at LIMIT 50",
  );
  let moved = 0;
  for (const row of rows) if ((await syncOrder(ctx, row)).status !== row.status) moved += 1;
  return moved;
}

import type { PreflightResult, RepositoryWorkPayload } from '@svc/protocol';
import type { Static } from '@sinclair/typebox';
import type { ServiceContext } from '../../service-context.js';
import { ApiError } from '../../platform/errors.js';
import { newId } from '../../platform/ids.js';
import type { Principal } from '../../platform/principal.js';
import { loadTokenBox } from '../../platform/token-box.js';
import { fileBlobKey, presignFileUrl } from '../gateway/files.js';
import { cancelJob, submitRepositoryJob, withRepositoryJobCredit } from '../jobs/service.js';
import { findJob } from '../jobs/store.js';
import { fetchBaseBundle, GitError, type Remote } from './git.js';
import type { CreateWorkRepositoryRequest, PreflightWorkRepositoryRequest } from './schemas.js';
import * as store from './store.js';
import { readWorkResult } from '../work/results.js';

const iso = (d: Date | null) => (d ? d.toISOString() : null);
const tokenPurpose = (id: string) => `work_repository:${id}`;

/** A connection as the API shows it: the token only as `has_token`. */
export function repositoryView(r: store.RepositoryRow) {
  return {
    id: r.id,
    repository_url: r.repository_url,
    default_branch: r.default_branch,
    label: r.label,
    has_token: r.token_sealed !== null,
    token_key_id: r.token_key_id,
    created_at: r.created_at.toISOString(),
    last_preflight_at: iso(r.last_preflight_at),
    last_preflight_status: r.last_preflight_status,
    last_preflight_job_id: r.last_preflight_job_id,
  };
}

export async function checkRepositoryUrl(ctx: ServiceContext, url: string, path = '/repository_url'): Promise<void> {
  await ctx.egress.checkUrl(url, path);
}

export async function createRepository(
  ctx: ServiceContext,
  principal: Principal,
  body: Static<typeof CreateWorkRepositoryRequest>,
) {
  await checkRepositoryUrl(ctx, body.repository_url);
  const id = newId('wrepo');
  const sealed = body.repo_host_token
    ? (await loadTokenBox(ctx.db)).seal(body.repo_host_token, tokenPurpose(id))
    : undefined;
  const row = await store.insertRepository(ctx.db, {
    id,
    org_id: principal.orgId,
    repository_url: body.repository_url,
    default_branch: body.default_branch ?? 'main',
    label: body.label ?? null,
    token_sealed: sealed?.sealed ?? null,
    token_key_id: sealed?.keyId ?? null,
  });
  return repositoryView(row);
}

export async function getRepository(
  ctx: ServiceContext,
  principal: Principal,
  id: string,
): Promise<store.RepositoryRow> {
  const row = await store.findRepository(ctx.db, principal.orgId, id);
  if (!row) throw new ApiError('not_found', `repository connection ${id} not found`);
  return row;
}

export async function listRepositories(ctx: ServiceContext, principal: Principal) {
  const rows = await store.listRepositories(ctx.db, principal.orgId);
  return { repositories: rows.map(repositoryView), total: rows.length };
}

export async function deleteRepository(ctx: ServiceContext, principal: Principal, id: string) {
  if (!(await store.deleteRepository(ctx.db, principal.orgId, id)))
    throw new ApiError('not_found', `repository connection ${id} not found`);
  return { message: `repository connection ${id} deleted; its token is erased` };
}

/**
 * How the server reaches a connection's repository, checked by the egress guard now: the token
 * opened only here, in memory, and git pinned to the addresses the guard checked (so a DNS answer
 * that changes after the check cannot send git, or the token, elsewhere). Call it right before
 * the git command that uses it.
 */
export async function remoteOf(
  ctx: ServiceContext,
  repo: Pick<store.RepositoryRow, 'id' | 'repository_url' | 'token_sealed'> | null,
  url: string,
): Promise<Remote> {
  const target = repo?.token_sealed ? repo.repository_url : url;
  const { addresses } = await ctx.egress.checkAddresses(target, '/repository_url');
  if (!repo?.token_sealed) return { url, token: null, addresses };
  return {
    url: repo.repository_url,
    token: (await loadTokenBox(ctx.db)).open(repo.token_sealed, tokenPurpose(repo.id)),
    addresses,
  };
}

/**
 * Fetches `branch` and stores its bundle where the node can fetch it: a presigned file URL,
 * valid for the job's whole time limit plus an hour of queueing.
 */
export async function stageBaseBundle(
  ctx: ServiceContext,
  remote: Remote,
  branch: string,
  name: string,
  timeoutSeconds: number,
  path: string,
) {
  let fetched: Awaited<ReturnType<typeof fetchBaseBundle>>;
  try {
    fetched = await fetchBaseBundle(remote, branch);
  } catch (err) {
    if (err instanceof GitError)
      throw new ApiError('invalid_request', `the repository's ${branch} branch could not be fetched: ${err.message}`, [
        { path, message: 'could not be fetched' },
      ]);
    throw err;
  }
  const key = fileBlobKey(name);
  await ctx.blobs.put(key, fetched.bundle, 'application/x-git-bundle');
  const url = presignFileUrl(ctx, name, Math.floor(Date.now() / 1000) + timeoutSeconds + 3600);
  return { key, url, commit: fetched.commit, tooling: fetched.tooling };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Runs a preflight as a kind 9 job and waits for it (up to `timeout_seconds`): the server
 * fetches the base branch, a node with a capsule clones it, detects the tooling and checks the
 * requested tools. `failed` when the branch cannot be fetched, the job fails, or no node
 * finishes in time (the job is then cancelled and its hold released).
 */
export async function preflight(
  ctx: ServiceContext,
  principal: Principal,
  id: string,
  body: Static<typeof PreflightWorkRepositoryRequest>,
) {
  const repo = await getRepository(ctx, principal, id);
  const remote = await remoteOf(ctx, repo, repo.repository_url);
  const base = body.base_branch ?? repo.default_branch;
  const timeout = body.timeout_seconds ?? 900;
  const answer = async (
    status: 'ready' | 'blocked' | 'failed',
    nextAction: string,
    extra: { job_id?: string; base_commit?: string; tooling?: PreflightResult['tooling']; missing?: string[] } = {},
  ) => {
    const updated = (await store.notePreflight(ctx.db, repo.id, status, extra.job_id ?? null)) ?? repo;
    return {
      status,
      next_action: nextAction,
      job_id: extra.job_id ?? null,
      evidence_path: extra.job_id ? `/api/v1/jobs/${extra.job_id}/evidence` : null,
      base_branch: base,
      base_commit: extra.base_commit ?? null,
      tooling: extra.tooling ?? null,
      missing: extra.missing ?? [],
      repository: repositoryView(updated),
    };
  };
  let staged: Awaited<ReturnType<typeof stageBaseBundle>>;
  try {
    staged = await stageBaseBundle(ctx, remote, base, `wpf-${newId('b')}.bundle`, timeout, '/base_branch');
  } catch (err) {
    if (err instanceof ApiError && err.code === 'invalid_request')
      return answer('failed', `${err.message}. Check repository_url, the branch name and the connection's token.`);
    throw err;
  }
  const payload: RepositoryWorkPayload = {
    mode: 'preflight',
    bundle_url: staged.url,
    base_branch: base,
    base_commit: staged.commit,
    timeout_seconds: timeout,
    tooling: body.tooling ?? [],
  };
  const job = await withRepositoryJobCredit(ctx, principal.orgId, () =>
    ctx.db.transaction((tx) =>
      submitRepositoryJob(ctx, tx, principal, {
        payload: { ...payload },
        strict_jurisdiction: body.jurisdiction ?? null,
        requires_tee: body.requires_tee ?? false,
        timeout_seconds: timeout,
      }),
    ),
  ).catch(async (err: unknown) => {
    await ctx.blobs.delete(staged.key);
    throw err;
  });
  await ctx.bus.publish('jobs', job.id);
  const deadline = Date.now() + timeout * 1000;
  for (;;) {
    const current = await findJob(ctx.db, principal.orgId, job.id);
    if (current?.status === 'completed' && current.work_id) {
      const blob = await readWorkResult(ctx, current.work_id);
      const result = blob ? (JSON.parse(blob.bytes.toString('utf8')) as PreflightResult) : undefined;
      await ctx.blobs.delete(staged.key);
      if (!result || result.mode !== 'preflight')
        return answer('failed', 'the node returned no preflight result; run the preflight again', { job_id: job.id });
      const extra = {
        job_id: job.id,
        base_commit: result.base_commit,
        tooling: result.tooling,
        missing: result.missing,
      };
      if (result.status === 'ready')
        return answer(
          'ready',
          `create a work order: POST /api/v1/work/orders with repository_connection_id ${repo.id}`,
          extra,
        );
      return answer(
        'blocked',
        `the repository lacks ${result.missing.join(', ')}: add it (a package manager file or a script) or leave it out of tooling`,
        extra,
      );
    }
    if (current && ['failed', 'cancelled'].includes(current.status)) {
      await ctx.blobs.delete(staged.key);
      return answer('failed', `the preflight job ${current.status}: ${current.failure_reason ?? 'no reason given'}`, {
        job_id: job.id,
        base_commit: staged.commit,
      });
    }
    if (Date.now() >= deadline) {
      await cancelJob(ctx, principal, job.id).catch(() => undefined);
      await ctx.blobs.delete(staged.key);
      return answer(
        'failed',
        `no node finished the preflight within ${timeout} s: start a node with --capsule that meets the constraints, then try again`,
        { job_id: job.id, base_commit: staged.commit },
      );
    }
    await sleep(200);
  }
}

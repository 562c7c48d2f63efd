import type { ExecuteResult } from '@svc/protocol';
import type { PlatformServices } from '../../platform/services.js';
import { findNode, isAttested } from '../nodes/store.js';
import { GitError, inspectWork, WorkMismatch, type InspectedWork } from './git.js';
import type { NodeTrust } from './policy.js';
import type * as store from './store.js';

/**
 * What certification rests on besides the policy, found out rather than taken from the node: what
 * its commit really changes (from the bundles), and whether the organization trusts the node.
 */

/**
 * Whether the organization trusts the node that ran an order to report its checks: its own node,
 * or a node whose TEE attestation is verified now. Any other node's checks are only its claim.
 */
export async function nodeTrustOf(ctx: PlatformServices, orgId: string, nodeId: string | null): Promise<NodeTrust> {
  const node = nodeId ? await findNode(ctx.db, nodeId) : undefined;
  if (!node) return 'untrusted';
  if (node.org_id === orgId) return 'own';
  return isAttested(node) ? 'tee_verified' : 'untrusted';
}

const sorted = (paths: readonly string[]) => [...new Set(paths)].sort();

/**
 * Why the server could not certify on a node's result: `base_missing` (the order's base bundle is
 * gone) and `unreadable` (git could not do its part) are the server's own failures;
 * `no_bundle` (a commit reported without its bundle), `bundle_mismatch` (the bundle does not
 * hold the reported commit on the work branch, descending from the base) and `paths_differ`
 * (the commit changes other paths than reported) prove the node's signed report false.
 */
export type ProblemKind = 'base_missing' | 'unreadable' | 'no_bundle' | 'bundle_mismatch' | 'paths_differ';

/** The problems that prove the node's report false: its job's charge is reversed and the node loses reputation. */
export const PROVEN_FALSE: Readonly<Record<ProblemKind, boolean>> = {
  base_missing: false,
  unreadable: false,
  no_bundle: true,
  bundle_mismatch: true,
  paths_differ: true,
};

/** A problem that fails the order: what it is, the reason shown, and its evidence. */
export interface Problem {
  kind: ProblemKind;
  problem: string;
  metadata: Record<string, unknown>;
}

/**
 * What the node's commit really changes, from the order's base bundle and the node's work bundle
 * (never the node's word), or the problem that fails the order: a bundle that does not hold the
 * reported commit, or changed paths that differ from the node's report (the node is named), or
 * one of the server's own (see {@link ProblemKind}).
 */
export async function recompute(
  ctx: PlatformServices,
  order: store.OrderRow,
  result: ExecuteResult,
  nodeId: string | null,
): Promise<{ work: InspectedWork } | Problem> {
  const node = `node ${nodeId ?? 'unknown'}`;
  let work: InspectedWork = { changed_paths: [], diff: '', diff_truncated: false };
  if (result.commit_sha !== null) {
    const base = await ctx.blobs.get(order.spec.base_bundle_key);
    if (!base)
      return { kind: 'base_missing', problem: 'the base bundle of this order is no longer stored', metadata: {} };
    if (!result.bundle_base64)
      return {
        kind: 'no_bundle',
        problem: `${node} reported commit ${result.commit_sha} without a bundle of it`,
        metadata: { commit_sha: result.commit_sha },
      };
    try {
      work = await inspectWork({
        baseBundle: base.bytes,
        workBundle: Buffer.from(result.bundle_base64, 'base64'),
        workBranch: order.spec.work_branch,
        baseCommit: order.base_commit ?? result.base_commit,
        commit: result.commit_sha,
      });
    } catch (err) {
      if (err instanceof WorkMismatch)
        return {
          kind: 'bundle_mismatch',
          problem: `${node}'s work bundle does not hold what it reported: ${err.message}`,
          metadata: { commit_sha: result.commit_sha },
        };
      if (!(err instanceof GitError)) throw err;
      return {
        kind: 'unreadable',
        problem: `the server could not read ${node}'s work bundle: ${err.message}`,
        metadata: {},
      };
    }
  }
  const reported = sorted(result.changed_paths);
  const computed = sorted(work.changed_paths);
  const unreported = computed.filter((p) => !reported.includes(p));
  const unchanged = reported.filter((p) => !computed.includes(p));
  if (unreported.length === 0 && unchanged.length === 0) return { work };
  const listed = (paths: string[]) => paths.slice(0, 20).join(', ') + (paths.length > 20 ? ', ...' : '');
  return {
    kind: 'paths_differ',
    problem: `${node} reported changed paths that differ from its commit ${result.commit_sha ?? '(none)'}${unreported.length ? `: changed but not reported: ${listed(unreported)}` : ''}${unchanged.length ? `; reported but not changed: ${listed(unchanged)}` : ''}`,
    metadata: {
      commit_sha: result.commit_sha,
      reported_changed_paths: result.changed_paths,
      changed_paths: work.changed_paths,
      unreported_paths: unreported,
      unchanged_paths: unchanged,
    },
  };
}

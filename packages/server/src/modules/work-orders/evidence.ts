import type { ServiceContext } from '../../service-context.js';
import type { Principal } from '../../platform/principal.js';
import { evidenceBundle, evidenceGraph } from '../evidence/service.js';
import { receiptsOfJob, receiptView } from '../receipts/store.js';
import { loadOrder, orderView } from './orders.js';

/** GET /api/v1/work/orders/{id}/evidence: the order's run as a graph. */
export async function orderEvidence(ctx: ServiceContext, principal: Principal, id: string) {
  await loadOrder(ctx, principal, id);
  return evidenceGraph(ctx, principal, id);
}

/**
 * GET /api/v1/work/orders/{id}/evidence/bundle: the order's signed run plus the `work_order`
 * section (snapshot, certification decision, approvals, pull request, rollback, and the node's
 * SVC1 receipt for the result that was certified). Its `result` keeps what the server recomputed
 * (`server_verified`: changed paths and diff from the bundles) apart from what only the node
 * says (`node_claim`: its checks above all). `svc verify` checks the section against the
 * graph (docs/work-orders.md).
 */
export async function orderBundle(ctx: ServiceContext, principal: Principal, id: string) {
  const order = await loadOrder(ctx, principal, id);
  const view = orderView(order);
  const receipt = order.job_id ? (await receiptsOfJob(ctx.db, principal.orgId, order.job_id))[0] : undefined;
  const rollbackRun = order.rollback ? await evidenceGraph(ctx, principal, `${id}.rollback`).catch(() => null) : null;
  const workOrder = {
    snapshot: { ...view, timeout_seconds: order.spec.timeout_seconds, requires_tee: order.spec.requires_tee },
    decision: order.decision,
    result: order.result
      ? {
          result_hash: order.result.result_hash,
          node_id: order.result.node_id,
          changed_paths: order.result.changed_paths,
          diff_sha256: order.result.diff_sha256,
          checks: view.checks,
          capsule: order.result.capsule,
          // The two sides kept apart: recomputed by the server from the bundles, and the node's signed claim.
          server_verified: view.server_verified,
          node_claim: view.node_claim,
        }
      : null,
    job_receipt: receipt ? receiptView(receipt) : null,
    approvals: order.approvals,
    pr: order.pr,
    rollback: order.rollback ? { ...order.rollback, evidence: rollbackRun } : null,
  };
  const bundle = await evidenceBundle(ctx, principal, id, {
    job: { type: 'work_order', ...view },
    extra: { work_order: workOrder },
  });
  return { ...bundle, fileName: `evidence-${id}.json` };
}

import { svc1MessageBytes, verifyEd25519 } from './primitives.js';

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);

export interface WorkOrderCheck {
  name: string;
  ok: boolean;
  reason: string;
}

/** The metadata of the last event of `type` in the graph. */
function lastOf(events: readonly Obj[], type: string): Obj | undefined {
  const found = events.filter((e) => e.event_type === type);
  const meta = found[found.length - 1]?.metadata;
  return isObj(meta) ? meta : undefined;
}

/**
 * Checks a bundle's `work_order` section against its (already hash-checked) graph: the order is
 * the run's subject, and its certification decision, commit, approvals and pull request are the
 * ones the signed events record; the node's SVC1 receipt verifies and is the result the
 * `capsule.finished` event names.
 *
 * @example
 * const checks = await workOrderChecks(bundle.work_order, run, events);
 */
export async function workOrderChecks(section: unknown, run: Obj, events: readonly Obj[]): Promise<WorkOrderCheck[]> {
  const checks: WorkOrderCheck[] = [];
  const add = (name: string, ok: boolean, reason: string) => checks.push({ name, ok, reason });
  if (!isObj(section) || !isObj(section.snapshot)) {
    add('work_order', false, 'the work_order section has no snapshot');
    return checks;
  }
  const snap = section.snapshot;
  add('work_order', snap.id === run.job_id, snap.id === run.job_id ? `work order ${String(snap.id)} is the run's subject` : `the run is for ${String(run.job_id)}, the section for ${String(snap.id)}`);

  const decided = lastOf(events, 'certification.decided');
  const decision = isObj(section.decision) ? section.decision : null;
  const decisionOk = decision === null ? decided === undefined : decided !== undefined && decided.certification === decision.certification && JSON.stringify(decided.reasons) === JSON.stringify(decision.reasons);
  add('work_order_decision', decisionOk, decisionOk ? `${String(decision?.certification ?? 'no decision yet')}, as the certification.decided event records` : 'the decision differs from the certification.decided event');

  const diff = lastOf(events, 'diff.produced');
  const commitOk = diff === undefined ? snap.commit_sha === null || snap.commit_sha === undefined : diff.commit_sha === snap.commit_sha;
  add('work_order_commit', commitOk, commitOk ? `commit ${String(snap.commit_sha)}` : `the snapshot's commit ${String(snap.commit_sha)} differs from the diff.produced event's ${String(diff?.commit_sha)}`);

  const approvals = Array.isArray(section.approvals) ? section.approvals.filter(isObj) : [];
  const recorded = events.filter((e) => e.event_type === 'approval.recorded').map((e) => (isObj(e.metadata) ? e.metadata : {}));
  const unbound = approvals.filter((a) => !recorded.some((m) => m.by === a.by && m.decision === a.decision && m.at === a.at));
  add('work_order_approvals', unbound.length === 0, unbound.length === 0 ? `${approvals.length} approvals, each in the graph` : `approvals missing from the graph: ${unbound.map((a) => `${String(a.decision)} by ${String(a.by)}`).join(', ')}`);

  if (isObj(section.pr)) {
    const opened = lastOf(events, 'pr.opened');
    const ok = opened !== undefined && opened.url === section.pr.url;
    add('work_order_pr', ok, ok ? `pull request ${String(section.pr.url)}` : 'the pull request differs from the pr.opened event');
  }

  if (isObj(section.job_receipt)) {
    const r = section.job_receipt;
    const message = svc1MessageBytes({ job_id: r.job_id, node_public_key_hex: r.node_public_key, result_hash_hex: r.result_hash, metering_units: r.metering_units });
    const signed = r.signature_version === 'SVC1' && message !== undefined && (await verifyEd25519(String(r.node_public_key), message, String(r.signature)));
    const finished = lastOf(events, 'capsule.finished');
    const bound = finished !== undefined && finished.receipt_id === r.id && finished.result_hash === r.result_hash && finished.job_id === r.job_id;
    add('work_order_receipt', signed && bound, !signed ? "the node's SVC1 signature does not verify" : bound ? `SVC1 by node ${String(r.node_public_key)}, bound to capsule.finished` : 'the receipt is not the one the capsule.finished event names');
  }
  return checks;
}

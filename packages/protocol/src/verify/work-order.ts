import { parentsOf } from '../evidence.js';
import { canonicalJson } from '../jcs.js';
import {
  certificateMessageBytes,
  concat,
  merkleRootHex,
  sha256Hex,
  svc1MessageBytes,
  utf8,
  verifyEd25519,
} from './primitives.js';

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
 * Why a rollback's own run does not hold, or undefined when it does: every event hash recomputed,
 * the Merkle root over them, and the certificate by `signers` (the platform keys the bundle's
 * main certificate was checked against) over that root.
 */
async function rollbackRunProblem(
  graph: unknown,
  subject: unknown,
  signers: readonly string[],
): Promise<string | undefined> {
  if (
    !isObj(graph) ||
    !isObj(graph.run) ||
    !Array.isArray(graph.events) ||
    !Array.isArray(graph.edges) ||
    !isObj(graph.certificate)
  )
    return 'the rollback carries no evidence graph';
  const run = graph.run;
  if (run.job_id !== `${String(subject)}.rollback`) return `the rollback run is for ${String(run.job_id)}`;
  const events = graph.events.filter(isObj);
  const refs = events.map((e) => ({ id: String(e.id), sequence: Number(e.sequence) }));
  const edges = graph.edges.filter(isObj).map((e) => ({
    from_event_id: String(e.from_event_id),
    to_event_id: String(e.to_event_id),
    edge_type: String(e.edge_type),
  }));
  const hashes: string[] = [];
  for (const [i, e] of events.entries()) {
    if (e.run_id !== run.id || e.sequence !== i + 1) return `rollback event ${i + 1} is out of place`;
    const input = {
      run_id: e.run_id,
      sequence: e.sequence,
      event_type: e.event_type,
      subject_id: e.subject_id,
      summary: e.summary,
      metadata: e.metadata,
      created_at: e.created_at,
      parents: parentsOf(String(e.id), refs, edges),
    };
    const hash = await sha256Hex(concat(Uint8Array.of(0), utf8(canonicalJson(input))));
    if (hash !== e.event_hash) return `rollback event ${i + 1} does not hash to its event_hash`;
    hashes.push(hash);
  }
  const root = await merkleRootHex(hashes);
  if (root !== run.root_hash) return 'the rollback root does not match its events';
  const signer = String(run.signer_public_key_hex);
  if (!signers.includes(signer)) return `the rollback is signed by ${signer}, not a key this bundle trusts`;
  const ok = await verifyEd25519(
    signer,
    certificateMessageBytes(String(run.id), hashes.length, root),
    String(run.root_signature_hex),
  );
  return ok ? undefined : 'the rollback certificate does not verify';
}

/**
 * Checks a bundle's `work_order` section against its (already hash-checked) graph: the order is
 * the run's subject, and its certification decision, commit, approvals and pull request are the
 * ones the signed events record; the node's SVC1 receipt verifies and is the result the
 * `capsule.finished` event names; a rollback's own run holds and is signed by a trusted key.
 *
 * @example
 * const checks = await workOrderChecks(bundle.work_order, run, events);
 */
export async function workOrderChecks(
  section: unknown,
  run: Obj,
  events: readonly Obj[],
  signers: readonly string[] = [],
): Promise<WorkOrderCheck[]> {
  const checks: WorkOrderCheck[] = [];
  const add = (name: string, ok: boolean, reason: string) => checks.push({ name, ok, reason });
  if (!isObj(section) || !isObj(section.snapshot)) {
    add('work_order', false, 'the work_order section has no snapshot');
    return checks;
  }
  const snap = section.snapshot;
  add(
    'work_order',
    snap.id === run.job_id,
    snap.id === run.job_id
      ? `work order ${String(snap.id)} is the run's subject`
      : `the run is for ${String(run.job_id)}, the section for ${String(snap.id)}`,
  );

  const decided = lastOf(events, 'certification.decided');
  const decision = isObj(section.decision) ? section.decision : null;
  const decisionOk =
    decision === null
      ? decided === undefined
      : decided !== undefined &&
        decided.certification === decision.certification &&
        JSON.stringify(decided.reasons) === JSON.stringify(decision.reasons);
  add(
    'work_order_decision',
    decisionOk,
    decisionOk
      ? `${String(decision?.certification ?? 'no decision yet')}, as the certification.decided event records`
      : 'the decision differs from the certification.decided event',
  );

  const diff = lastOf(events, 'diff.produced');
  const commitOk =
    diff === undefined
      ? snap.commit_sha === null || snap.commit_sha === undefined
      : diff.commit_sha === snap.commit_sha;
  add(
    'work_order_commit',
    commitOk,
    commitOk
      ? `commit ${String(snap.commit_sha)}`
      : `the snapshot's commit ${String(snap.commit_sha)} differs from the diff.produced event's ${String(diff?.commit_sha)}`,
  );

  const approvals = Array.isArray(section.approvals) ? section.approvals.filter(isObj) : [];
  const recorded = events
    .filter((e) => e.event_type === 'approval.recorded')
    .map((e) => (isObj(e.metadata) ? e.metadata : {}));
  const unbound = approvals.filter(
    (a) => !recorded.some((m) => m.by === a.by && m.decision === a.decision && m.at === a.at),
  );
  add(
    'work_order_approvals',
    unbound.length === 0,
    unbound.length === 0
      ? `${approvals.length} approvals, each in the graph`
      : `approvals missing from the graph: ${unbound.map((a) => `${String(a.decision)} by ${String(a.by)}`).join(', ')}`,
  );

  if (isObj(section.pr)) {
    const opened = lastOf(events, 'pr.opened');
    const ok = opened !== undefined && opened.url === section.pr.url;
    add(
      'work_order_pr',
      ok,
      ok ? `pull request ${String(section.pr.url)}` : 'the pull request differs from the pr.opened event',
    );
  }

  if (isObj(section.job_receipt)) {
    const r = section.job_receipt;
    const message = svc1MessageBytes({
      job_id: r.job_id,
      node_public_key_hex: r.node_public_key,
      result_hash_hex: r.result_hash,
      metering_units: r.metering_units,
    });
    const signed =
      r.signature_version === 'SVC1' &&
      message !== undefined &&
      (await verifyEd25519(String(r.node_public_key), message, String(r.signature)));
    const finished = lastOf(events, 'capsule.finished');
    const bound =
      finished !== undefined &&
      finished.receipt_id === r.id &&
      finished.result_hash === r.result_hash &&
      finished.job_id === r.job_id;
    add(
      'work_order_receipt',
      signed && bound,
      !signed
        ? "the node's SVC1 signature does not verify"
        : bound
          ? `SVC1 by node ${String(r.node_public_key)}, bound to capsule.finished`
          : 'the receipt is not the one the capsule.finished event names',
    );
  }
  if (isObj(section.rollback)) {
    const problem = await rollbackRunProblem(section.rollback.evidence, snap.id, signers);
    const graph = section.rollback.evidence as { run?: { root_hash?: unknown } } | null;
    add(
      'work_order_rollback',
      problem === undefined,
      problem ?? `rollback run signed, root ${String(graph?.run?.root_hash)}`,
    );
  }
  return checks;
}

import {
  BUNDLE_TYPE,
  EVIDENCE_CERT_ALGORITHM,
  EVIDENCE_CERT_VERSION,
  bundleHash,
  eventHash,
  merkleRoot,
  parentsOf,
  verifyCertificate,
} from '@svc/protocol';
import type { ServiceContext } from '../../service-context.js';
import { ApiError } from '../../platform/errors.js';
import type { Principal } from '../../platform/principal.js';
import { receiptsOfJob, receiptView } from '../receipts/store.js';
import { bundleLogSection } from '../log/service.js';
import { platformKeys } from '../system/service.js';
import { certifyRuns, derivedEventRows } from './recorder.js';
import {
  findRun,
  graphOf,
  graphOfRows,
  listRuns,
  type EdgeRow,
  type EventRow,
  type RunFilter,
  type RunRow,
  type RunStatus,
} from './store.js';

const iso = (d: Date | null) => (d ? d.toISOString() : null);

/**
 * A run's status as the API shows it: `open` while events are recorded, `completed` once it is
 * closed (its certificate says it is signed). The store keeps `signed`; `?status=signed` is still
 * accepted as an alias of `completed` (docs/evidence.md).
 *
 * @example
 * publicRunStatus('signed'); // 'completed'
 */
export function publicRunStatus(status: RunStatus): 'open' | 'completed' {
  return status === 'signed' ? 'completed' : 'open';
}

/** The stored status a `?status=` filter names: `completed` (and its old name `signed`) or `open`. */
export function storedRunStatus(status: 'open' | 'completed' | 'signed'): RunStatus {
  return status === 'open' ? 'open' : 'signed';
}

export function runView(run: RunRow) {
  return {
    id: run.id,
    job_id: run.job_id,
    buyer_id: run.buyer_id,
    subject_type: run.subject_type,
    status: publicRunStatus(run.status),
    summary: run.summary,
    jurisdiction: run.jurisdiction,
    policy_id: run.policy_id,
    trust_tier: run.trust_tier,
    work_type: run.work_type,
    event_count: run.event_count,
    root_hash: run.root_hash,
    root_signature_hex: run.root_signature_hex,
    signer_public_key_hex: run.signer_public_key_hex,
    signer_key_id: run.signer_key_id,
    created_at: run.created_at.toISOString(),
    updated_at: run.updated_at.toISOString(),
    signed_at: iso(run.signed_at),
  };
}

function eventView(e: EventRow) {
  return {
    id: e.id,
    run_id: e.run_id,
    sequence: e.sequence,
    event_type: e.event_type,
    subject_id: e.subject_id,
    summary: e.summary,
    metadata: JSON.parse(e.metadata) as Record<string, unknown>,
    created_at: e.created_at,
    event_hash: e.event_hash,
  };
}

/**
 * The certificate, with `verified` computed here and now: every event hash recomputed from its
 * fields and edges, the root recomputed from them, and the signature checked against the signer.
 */
function certificateOf(run: RunRow, events: ReturnType<typeof eventView>[], edges: EdgeRow[]) {
  const signed =
    run.status === 'signed' &&
    run.root_hash !== null &&
    run.root_signature_hex !== null &&
    run.signer_public_key_hex !== null;
  let verified = false;
  let note = 'the run is open: it is signed when its job or request reaches a terminal state';
  if (signed) {
    const hashesHold = events.every(
      (e) => eventHash({ ...e, parents: parentsOf(e.id, events, edges) }) === e.event_hash,
    );
    const root = merkleRoot(events.map((e) => e.event_hash));
    verified =
      hashesHold &&
      root === run.root_hash &&
      verifyCertificate(
        { run_id: run.id, event_count: events.length, root_hash_hex: root },
        run.root_signature_hex ?? '',
        run.signer_public_key_hex ?? '',
      );
    note = verified
      ? `verified now: ${events.length} event hashes and the Merkle root recomputed, the Ed25519 signature checked against ${run.signer_key_id ?? 'the signer'}`
      : 'VERIFICATION FAILED: the stored graph does not match its signed root';
  }
  return {
    algorithm: EVIDENCE_CERT_ALGORITHM,
    version: EVIDENCE_CERT_VERSION,
    root_hash: run.root_hash,
    signature_hex: run.root_signature_hex,
    signer_public_key_hex: run.signer_public_key_hex,
    key_id: run.signer_key_id,
    signed,
    verified,
    signed_at: iso(run.signed_at),
    note,
  };
}

/** The tenant's run of a subject, its certificate signed now when it has none yet (a derived run's first read). */
async function runOf(ctx: ServiceContext, principal: Principal, subjectId: string): Promise<RunRow> {
  const run = await findRun(ctx.db, principal.orgId, subjectId);
  if (!run) throw new ApiError('not_found', `no evidence for ${subjectId}`);
  const [certified] = await certifyRuns(ctx.db, ctx.secrets, [run]);
  return certified ?? run;
}

/**
 * A run's events and edges: read from its rows, or, for a gateway request whose events are not
 * stored, derived from the request's records exactly as they were hashed when it closed.
 */
async function eventsOf(ctx: ServiceContext, run: RunRow): Promise<{ events: EventRow[]; edges: EdgeRow[] }> {
  const batches =
    run.subject_type === 'request' ? await ctx.evidenceSubjects.requestEvents(ctx.db, run.job_id) : undefined;
  if (!batches) return graphOf(ctx.db, run.id);
  return graphOfRows(derivedEventRows(run.id, run.job_id, batches));
}

async function graphOfRun(ctx: ServiceContext, run: RunRow) {
  const graph = await eventsOf(ctx, run);
  const events = graph.events.map(eventView);
  return { run: runView(run), events, edges: graph.edges, certificate: certificateOf(run, events, graph.edges) };
}

/** GET /api/v1/jobs/{job}/evidence: the run of a job or gateway request as a graph. */
export async function evidenceGraph(ctx: ServiceContext, principal: Principal, subjectId: string) {
  return graphOfRun(ctx, await runOf(ctx, principal, subjectId));
}

export async function evidenceRuns(ctx: ServiceContext, principal: Principal, filter: RunFilter) {
  const { rows, total } = await listRuns(ctx.db, principal.orgId, filter);
  const certified = await certifyRuns(ctx.db, ctx.secrets, rows);
  return { runs: certified.map(runView), total, limit: filter.limit, offset: filter.offset };
}

async function subjectView(ctx: ServiceContext, principal: Principal, run: RunRow): Promise<Record<string, unknown>> {
  if (run.subject_type === 'job') {
    const job = await ctx.evidenceSubjects.job(ctx.db, principal.orgId, run.job_id);
    return job ? { type: 'job', ...job } : { type: 'job', id: run.job_id };
  }
  if (run.subject_type === 'work_order') return { type: 'work_order', id: run.job_id };
  // A capture set's run describes its upload and processing: the set itself is read at its own path.
  if (run.subject_type === 'capture_set') return { type: 'capture_set', id: run.job_id };
  return (await ctx.evidenceSubjects.request(ctx.db, run.job_id)) ?? { type: 'request', id: run.job_id };
}

/** The steps an offline verifier runs, in order (docs/evidence.md). */
const VERIFIER_STEPS = [
  'parse the bundle strictly (no duplicate keys, bounded size)',
  'bundle_hash = hex SHA-256 of JCS(bundle without bundle_hash)',
  'for each event: event_hash = SHA-256(0x00 || JCS({run_id, sequence, event_type, subject_id, summary, metadata, created_at, parents}))',
  'root_hash = RFC 6962 Merkle tree hash over the event hashes in sequence order',
  'certificate: Ed25519 over "SVC2-draft\\n" + run_id + "\\n" + event_count + "\\n" + root_hash + "\\n" by a platform key valid at signed_at',
  'each receipt: SVC1 Ed25519 signature by node_public_key (docs/receipts.md)',
  'each receipt equals the receipt.verified event that names it (job_id, node_public_key, result_hash, metering_units, signature)',
  'log: the checkpoint is a note signed by a verifier key, the leaf is the run (id, root, event count), SHA-256(0x00 || JCS(leaf)) = leaf_hash, and the inclusion proof leads from it to the checkpoint root (docs/transparency-log.md)',
];

/**
 * GET /api/v1/jobs/{job}/evidence/bundle: everything an auditor needs offline, hashed. Returns
 * the exact JSON text (the hash covers these bytes' parsed value, so nothing may re-serialise it).
 */
export async function evidenceBundle(
  ctx: ServiceContext,
  principal: Principal,
  subjectId: string,
  /** Sections a resource family adds (a work order's `job` view and its `work_order` section). */
  sections: { job?: Record<string, unknown>; extra?: Record<string, unknown> } = {},
): Promise<{ text: string; fileName: string }> {
  const run = await runOf(ctx, principal, subjectId);
  const [graph, job, receipts, keys, log] = await Promise.all([
    graphOfRun(ctx, run),
    subjectView(ctx, principal, run),
    receiptsOfJob(ctx.db, principal.orgId, run.job_id),
    platformKeys(ctx),
    bundleLogSection(ctx, run.id),
  ]);
  const policy = graph.events.find((e) => e.event_type === 'policy.evaluated');
  const body = {
    type: BUNDLE_TYPE,
    generated_at: new Date().toISOString(),
    job: sections.job ?? job,
    policy_snapshot: policy ? { event_id: policy.id, ...policy.metadata } : {},
    receipts: receipts.map(receiptView),
    verifier: {
      algorithms: {
        event_hash: 'sha256-rfc6962-leaf-jcs',
        root_hash: 'rfc6962-merkle-sha256',
        certificate: EVIDENCE_CERT_ALGORITHM,
        certificate_version: EVIDENCE_CERT_VERSION,
        receipts: 'SVC1',
      },
      platform_keys: keys.keys,
      log,
      steps: VERIFIER_STEPS,
      command: 'svc verify BUNDLE.json --trust-file platform-keys.json',
    },
    evidence: graph,
    ...sections.extra,
  };
  // Plain JSON values only (no undefined, no Date), so the hash covers exactly what is sent.
  const plain = JSON.parse(JSON.stringify(body)) as Record<string, unknown>;
  const text = JSON.stringify({ ...plain, bundle_hash: bundleHash(plain) });
  return { text, fileName: `evidence-${run.job_id}.json` };
}

import canonicalize from 'canonicalize';
import {
  BUNDLE_TYPE,
  EVIDENCE_CERT_ALGORITHM,
  EVIDENCE_CERT_VERSION,
  EVIDENCE_TIMESTAMP_PATTERN,
  parentsOf,
} from '../evidence.js';
import { canonicalJson } from '../jcs.js';
import { ed25519PublicKeyHexProblem } from '../ed25519-point.js';
import {
  certificateMessageBytes,
  concat,
  isHex,
  merkleRootHex,
  sha256Hex,
  svc1MessageBytes,
  utf8,
  verifyEd25519,
} from './primitives.js';
import { logChecks } from './bundle-log.js';
import { parseStrictJson, STRICT_JSON_DEFAULT_MAX_BYTES } from './strict-json.js';
import { workOrderChecks } from './work-order.js';

/** One verification step and its outcome. `name` is stable (docs/evidence.md lists them). */
export interface BundleCheck {
  name: string;
  ok: boolean;
  reason: string;
  /** The log check of a bundle whose log entry is absent or pending: neither a pass nor (unless required) a failure. */
  status?: 'absent' | 'pending';
}

export interface BundleVerification {
  /** True only when every check passed. */
  ok: boolean;
  checks: BundleCheck[];
}

/** A key the auditor trusts, optionally with the window in which it may sign. */
export interface TrustedKey {
  public_key_hex: string;
  key_id?: string;
  valid_from?: string | null;
  valid_until?: string | null;
}

export interface VerifyBundleOptions {
  /**
   * Keys to trust for the certificate. Without them the verifier trusts the keys the bundle
   * itself lists (and says so): pin them to detect a bundle re-signed by someone else.
   */
  trustedKeys?: readonly (string | TrustedKey)[];
  /** Largest accepted bundle in bytes (default 16 MiB). */
  maxBytes?: number;
  /**
   * Note verifier keys (`<origin>+<hash>+<base64>`) to trust for the log's checkpoint, besides
   * the pinned `trustedKeys`. Without either, the bundle's own log keys are trusted (and the
   * check says so).
   */
  trustedLogKeys?: readonly string[];
  /** Fail a bundle without a log entry (made before the log) or whose entry is pending. */
  requireLog?: boolean;
}

type Obj = Record<string, unknown>;
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/** Every event field the hash covers, as the API returns it. */
const EVENT_FIELDS = [
  'id',
  'run_id',
  'sequence',
  'event_type',
  'subject_id',
  'summary',
  'metadata',
  'created_at',
  'event_hash',
] as const;

async function jcsSha256Hex(value: unknown): Promise<string> {
  return sha256Hex(utf8(canonicalJson(value)));
}

function graphProblems(run: Obj, events: unknown[], edges: unknown[]): string | undefined {
  const ids = new Set<string>();
  for (const [i, e] of events.entries()) {
    if (!isObj(e)) return `events[${i}] is not an object`;
    const missing = EVENT_FIELDS.find((f) => !(f in e));
    if (missing) return `events[${i}] has no ${missing}`;
    if (e.sequence !== i + 1)
      return `events[${i}] has sequence ${String(e.sequence)}, expected ${i + 1} (events in order, from 1, no gaps)`;
    if (e.run_id !== run.id) return `events[${i}] belongs to run ${String(e.run_id)}, not ${String(run.id)}`;
    if (typeof e.id !== 'string' || ids.has(e.id)) return `events[${i}] has a missing or repeated id`;
    if (typeof e.created_at !== 'string' || !EVIDENCE_TIMESTAMP_PATTERN.test(e.created_at))
      return `events[${i}].created_at is not ISO 8601 UTC with milliseconds`;
    ids.add(e.id);
  }
  const seqOf = new Map(events.filter(isObj).map((e) => [e.id, e.sequence]));
  for (const [i, edge] of edges.entries()) {
    if (!isObj(edge) || typeof edge.edge_type !== 'string') return `edges[${i}] is not an edge`;
    if (edge.run_id !== run.id) return `edges[${i}] belongs to run ${String(edge.run_id)}`;
    const from = seqOf.get(str(edge.from_event_id) ?? '');
    const to = seqOf.get(str(edge.to_event_id) ?? '');
    if (typeof from !== 'number' || typeof to !== 'number')
      return `edges[${i}] names an event that is not in the graph`;
    if (from >= to) return `edges[${i}] points backwards (sequence ${from} -> ${to})`;
  }
  return undefined;
}

function parseTime(v: unknown): number | undefined {
  if (typeof v !== 'string') return undefined;
  const t = Date.parse(v);
  return Number.isNaN(t) ? undefined : t;
}

function signerCheck(
  signer: string,
  signedAt: unknown,
  bundleKeys: unknown,
  pinned: readonly (string | TrustedKey)[] | undefined,
): BundleCheck {
  const name = 'signer_key';
  const listed = Array.isArray(bundleKeys) ? bundleKeys.filter(isObj) : [];
  const keys: TrustedKey[] = pinned
    ? pinned.map((k) => (typeof k === 'string' ? { public_key_hex: k } : k))
    : listed.map((k) => ({
        public_key_hex: str(k.public_key_hex) ?? '',
        key_id: str(k.key_id),
        valid_from: str(k.valid_from) ?? null,
        valid_until: str(k.valid_until) ?? null,
      }));
  const key = keys.find((k) => k.public_key_hex === signer);
  const source = pinned
    ? 'the pinned keys'
    : "the bundle's own key list (pin keys with --public-key or --trust-file to check who signed)";
  if (!key) return { name, ok: false, reason: `signer ${signer || '(none)'} is not among ${source}` };
  const at = parseTime(signedAt);
  const from = parseTime(key.valid_from);
  const until = parseTime(key.valid_until);
  if (at !== undefined && from !== undefined && at < from)
    return {
      name,
      ok: false,
      reason: `signed at ${String(signedAt)}, before the key became valid (${String(key.valid_from)})`,
    };
  if (at !== undefined && until !== undefined && at > until)
    return {
      name,
      ok: false,
      reason: `signed at ${String(signedAt)}, after the key was retired (${String(key.valid_until)})`,
    };
  return {
    name,
    ok: true,
    reason: `signer ${key.key_id ?? signer} is among ${pinned ? 'the pinned keys' : "the bundle's own key list (not pinned)"}${at !== undefined && (from !== undefined || until !== undefined) ? ' and was valid when it signed' : ''}`,
  };
}

/**
 * Verifies an evidence bundle (`svc.evidence_bundle.v1`) from its text, trusting nothing but
 * the math and, when given, the pinned platform keys: strict parsing, the bundle hash, every
 * event hash (edges included), the Merkle root, the certificate signature and its signer, every
 * receipt's SVC1 signature, that each receipt is bound to the graph, and the run's entry in the
 * transparency log (`verifier.log`: leaf, leaf hash, checkpoint signature, inclusion). WebCrypto
 * only, so it runs in Node.js and in browsers.
 *
 * @example
 * const { ok, checks } = await verifyBundle(await (await fetch(url)).text(), { trustedKeys: [platformKeyHex] });
 */
export async function verifyBundle(text: string, options: VerifyBundleOptions = {}): Promise<BundleVerification> {
  const checks: BundleCheck[] = [];
  const add = (name: string, ok: boolean, reason: string) => checks.push({ name, ok, reason });
  const done = () => ({ ok: checks.length > 0 && checks.every((c) => c.ok), checks });

  let bundle: unknown;
  try {
    bundle = parseStrictJson(text, { maxBytes: options.maxBytes ?? STRICT_JSON_DEFAULT_MAX_BYTES });
    // The JCS library must accept it too (lone surrogates, for one, are not canonical JSON).
    if (canonicalize(bundle) === undefined) throw new Error('not canonicalizable');
    add('parse', true, `${text.length} characters of strict JSON`);
  } catch (err) {
    add('parse', false, err instanceof Error ? err.message : String(err));
    return done();
  }
  if (!isObj(bundle)) {
    add('bundle_type', false, 'the bundle is not a JSON object');
    return done();
  }
  if (bundle.type !== BUNDLE_TYPE) {
    add('bundle_type', false, `type is ${JSON.stringify(bundle.type)}; this verifier knows ${BUNDLE_TYPE}`);
    return done();
  }
  add('bundle_type', true, BUNDLE_TYPE);

  const rest: Obj = { ...bundle };
  delete rest.bundle_hash;
  const recomputed = await jcsSha256Hex(rest);
  add(
    'bundle_hash',
    recomputed === bundle.bundle_hash,
    recomputed === bundle.bundle_hash
      ? recomputed
      : `recomputed ${recomputed}, the bundle says ${String(bundle.bundle_hash)}`,
  );

  const graph = bundle.evidence;
  const run = isObj(graph) ? graph.run : undefined;
  const events = isObj(graph) && Array.isArray(graph.events) ? graph.events : undefined;
  const edges = isObj(graph) && Array.isArray(graph.edges) ? graph.edges : undefined;
  const cert = isObj(graph) ? graph.certificate : undefined;
  if (!isObj(run) || !events || !edges || !isObj(cert)) {
    add('graph_structure', false, 'evidence must hold run, events, edges and certificate');
    return done();
  }
  const problem = graphProblems(run, events, edges);
  add(
    'graph_structure',
    problem === undefined,
    problem ?? `${events.length} events and ${edges.length} edges in run ${String(run.id)}`,
  );
  if (problem) return done();
  const job = isObj(bundle.job) ? bundle.job : {};
  add(
    'job_binding',
    run.job_id === job.id,
    run.job_id === job.id
      ? `run ${String(run.id)} is the run of ${String(job.id)}`
      : `the run is for ${String(run.job_id)}, the bundle's job is ${String(job.id)}`,
  );

  const evts = events.filter(isObj);
  const refs = evts.map((e) => ({ id: String(e.id), sequence: Number(e.sequence) }));
  const edgeRefs = edges.filter(isObj).map((e) => ({
    from_event_id: String(e.from_event_id),
    to_event_id: String(e.to_event_id),
    edge_type: String(e.edge_type),
  }));
  const hashes: string[] = [];
  for (const e of evts) {
    const input = {
      run_id: e.run_id,
      sequence: e.sequence,
      event_type: e.event_type,
      subject_id: e.subject_id,
      summary: e.summary,
      metadata: e.metadata,
      created_at: e.created_at,
      parents: parentsOf(String(e.id), refs, edgeRefs),
    };
    let computed: string;
    try {
      computed = await sha256Hex(concat(Uint8Array.of(0), utf8(canonicalJson(input))));
    } catch (err) {
      add(
        `event_hash[${String(e.sequence)}]`,
        false,
        `cannot hash: ${err instanceof Error ? err.message : String(err)}`,
      );
      hashes.push('');
      continue;
    }
    hashes.push(computed);
    const ok = computed === e.event_hash;
    add(
      `event_hash[${String(e.sequence)}]`,
      ok,
      ok
        ? `${String(e.event_type)} ${computed}`
        : `${String(e.event_type)}: recomputed ${computed}, the event says ${String(e.event_hash)}`,
    );
  }

  const root = hashes.every((h) => isHex(h, 32)) ? await merkleRootHex(hashes) : '';
  const rootOk = root !== '' && root === run.root_hash && root === cert.root_hash;
  add(
    'merkle_root',
    rootOk,
    rootOk
      ? `${root} over ${hashes.length} events`
      : `recomputed ${root || '(unavailable)'}, the run says ${String(run.root_hash)}, the certificate ${String(cert.root_hash)}`,
  );

  const signer = str(cert.signer_public_key_hex) ?? '';
  const signature = str(cert.signature_hex) ?? '';
  if (cert.algorithm !== EVIDENCE_CERT_ALGORITHM || cert.version !== EVIDENCE_CERT_VERSION) {
    add(
      'certificate_signature',
      false,
      `algorithm ${String(cert.algorithm)} / version ${String(cert.version)}; this verifier knows ${EVIDENCE_CERT_ALGORITHM} / ${EVIDENCE_CERT_VERSION}`,
    );
  } else if (run.signer_public_key_hex !== signer || run.root_signature_hex !== signature) {
    add('certificate_signature', false, 'the run and the certificate name different signatures or signers');
  } else {
    const signed = await verifyEd25519(
      signer,
      certificateMessageBytes(String(run.id), evts.length, String(cert.root_hash)),
      signature,
    );
    const keyProblem = signer ? ed25519PublicKeyHexProblem(signer) : undefined;
    add(
      'certificate_signature',
      signed,
      signed
        ? `Ed25519 by ${signer}`
        : keyProblem
          ? `the signer public key ${keyProblem}`
          : signature
            ? 'the signature does not verify for this run, event count, root and key'
            : 'the run is not signed (it has not reached a terminal state)',
    );
  }
  const verifier = isObj(bundle.verifier) ? bundle.verifier : {};
  checks.push(signerCheck(signer, cert.signed_at, verifier.platform_keys, options.trustedKeys));

  const receipts = Array.isArray(bundle.receipts) ? bundle.receipts : [];
  const verifiedEvents = evts.filter((e) => e.event_type === 'receipt.verified' && isObj(e.metadata));
  for (const [i, r] of receipts.entries()) {
    const receipt = isObj(r) ? r : {};
    const label = `receipt_signature[${str(receipt.id) ?? i}]`;
    const message = svc1MessageBytes({
      job_id: receipt.job_id,
      node_public_key_hex: receipt.node_public_key,
      result_hash_hex: receipt.result_hash,
      metering_units: receipt.metering_units,
    });
    const sigOk =
      receipt.signature_version === 'SVC1' &&
      message !== undefined &&
      (await verifyEd25519(String(receipt.node_public_key), message, String(receipt.signature)));
    const keyProblem = ed25519PublicKeyHexProblem(String(receipt.node_public_key));
    add(
      label,
      sigOk,
      sigOk
        ? `SVC1 by node ${String(receipt.node_public_key)}`
        : keyProblem
          ? `the node public key ${keyProblem}`
          : message
            ? 'the SVC1 signature does not verify'
            : 'the receipt fields cannot be encoded as SVC1',
    );

    const bound = verifiedEvents.find((e) => isObj(e.metadata) && e.metadata.receipt_id === receipt.id);
    const meta = isObj(bound?.metadata) ? bound.metadata : undefined;
    const mismatch = !meta
      ? 'no receipt.verified event in the graph names this receipt'
      : receipt.job_id !== run.job_id
        ? `the receipt is for ${String(receipt.job_id)}, the run for ${String(run.job_id)}`
        : (['job_id', 'node_public_key', 'result_hash', 'metering_units', 'signature'] as const).find(
            (f) => meta[f] !== receipt[f],
          );
    add(
      `receipt_binding[${str(receipt.id) ?? i}]`,
      mismatch === undefined,
      mismatch === undefined
        ? `bound to event ${String(bound?.sequence)}`
        : mismatch.includes(' ')
          ? mismatch
          : `${mismatch} differs from the receipt.verified event ${String(bound?.sequence)}`,
    );
  }
  const missing = verifiedEvents.filter(
    (e) => isObj(e.metadata) && !receipts.some((r) => isObj(r) && r.id === (e.metadata as Obj).receipt_id),
  );
  // A work order's bundle carries its section; it must agree with the signed graph.
  if (bundle.work_order !== undefined) {
    // The rollback run must be signed by a trusted platform key: the pinned ones, else the bundle's list.
    const listed = Array.isArray(verifier.platform_keys) ? verifier.platform_keys : [];
    const trusted = (options.trustedKeys ?? listed).map((k) =>
      typeof k === 'string' ? k : isObj(k) ? String(k.public_key_hex) : '',
    );
    checks.push(...(await workOrderChecks(bundle.work_order, run, evts, trusted)));
  }
  add(
    'receipts_complete',
    missing.length === 0,
    missing.length === 0
      ? `${receipts.length} receipts, each in the graph`
      : `the graph names receipts the bundle lacks: ${missing.map((e) => String((e.metadata as Obj).receipt_id)).join(', ')}`,
  );
  const platformKeys = Array.isArray(verifier.platform_keys) ? verifier.platform_keys.filter(isObj) : [];
  checks.push(
    ...(await logChecks(
      verifier.log,
      {
        run,
        eventCount: evts.length,
        certificateRoot: cert.root_hash,
        bundlePlatformKeys: platformKeys.map((k) => str(k.public_key_hex) ?? ''),
      },
      {
        pinnedKeys: options.trustedKeys?.map((k) => (typeof k === 'string' ? k : k.public_key_hex)),
        logKeys: options.trustedLogKeys,
        requireLog: options.requireLog,
      },
    )),
  );
  return done();
}

import { describe, expect, it } from 'vitest';
import { bundleHash, signCertificate } from '../certificate.js';
import { eventHash } from '../evidence-hash.js';
import { parentsOf } from '../evidence.js';
import { canonicalJson } from '../jcs.js';
import { generateEd25519, publicKeyHex, sha256Hex } from '../keys.js';
import { createMemoryLog } from '../log-memory.js';
import { checkpointText, noteVerifierKey, signNote } from '../log-note.js';
import { logRecordHash } from '../log-tree.js';
import { merkleRoot } from '../merkle.js';
import { signSvc1 } from '../svc1.js';
import { verifyBundle, type BundleVerification } from './bundle.js';

const platform = generateEd25519();
const node = generateEd25519();
const platformHex = publicKeyHex(platform.privateKey);
const nodeHex = publicKeyHex(node.privateKey);

/** A small but complete bundle, signed like the server signs one. */
function makeBundle(): Record<string, unknown> {
  const runId = 'run_test';
  const jobId = 'job_test';
  const receiptFields = {
    job_id: jobId,
    node_public_key_hex: nodeHex,
    result_hash_hex: sha256Hex('result'),
    metering_units: 7,
  };
  const receipt = {
    id: 'rcpt_1',
    job_id: jobId,
    node_id: 'node_1',
    node_public_key: nodeHex,
    result_hash: receiptFields.result_hash_hex,
    metering_units: 7,
    signature: signSvc1(receiptFields, node.privateKey),
    signature_version: 'SVC1',
    metadata: { country: 'CA' },
    created_at: '2026-11-21T18:00:02.000Z',
  };
  const specs = [
    { type: 'job.submitted', meta: { budget_cents: 100 } },
    { type: 'receipt.submitted', meta: { receipt_id: 'rcpt_1' } },
    {
      type: 'receipt.verified',
      meta: {
        receipt_id: 'rcpt_1',
        job_id: jobId,
        node_public_key: nodeHex,
        result_hash: receipt.result_hash,
        metering_units: 7,
        signature: receipt.signature,
      },
    },
    { type: 'job.completed', meta: {} },
  ];
  const edges = specs
    .slice(1)
    .map((_, i) => ({ run_id: runId, from_event_id: `evt_${i + 1}`, to_event_id: `evt_${i + 2}`, edge_type: 'then' }));
  edges.push({ run_id: runId, from_event_id: 'evt_2', to_event_id: 'evt_3', edge_type: 'caused_by' });
  const events = specs.map((s, i) => ({
    id: `evt_${i + 1}`,
    run_id: runId,
    sequence: i + 1,
    event_type: s.type,
    subject_id: jobId,
    summary: s.type,
    metadata: s.meta,
    created_at: `2026-11-21T18:00:0${i}.000Z`,
    event_hash: '',
  }));
  for (const e of events) e.event_hash = eventHash({ ...e, parents: parentsOf(e.id, events, edges) });
  const root = merkleRoot(events.map((e) => e.event_hash));
  const signature = signCertificate(
    { run_id: runId, event_count: events.length, root_hash_hex: root },
    platform.privateKey,
  );
  const signedAt = '2026-11-21T18:00:05.000Z';
  const bundle: Record<string, unknown> = {
    type: 'svc.evidence_bundle.v1',
    generated_at: '2026-11-21T18:01:00.000Z',
    job: { id: jobId, status: 'completed' },
    policy_snapshot: { jurisdiction: null },
    receipts: [receipt],
    verifier: {
      platform_keys: [
        { key_id: 'pk_1', public_key_hex: platformHex, valid_from: '2026-01-01T00:00:00.000Z', valid_until: null },
      ],
    },
    evidence: {
      run: {
        id: runId,
        job_id: jobId,
        status: 'signed',
        root_hash: root,
        root_signature_hex: signature,
        signer_public_key_hex: platformHex,
        signed_at: signedAt,
      },
      events,
      edges,
      certificate: {
        algorithm: 'ed25519-sha256',
        version: 'SVC2-draft',
        root_hash: root,
        signature_hex: signature,
        signer_public_key_hex: platformHex,
        signed: true,
        verified: true,
        signed_at: signedAt,
        note: '',
      },
    },
  };
  bundle.bundle_hash = bundleHash(bundle);
  return bundle;
}

/** Sets the value at a JSON path inside parsed JSON. */
function setAt(root: unknown, path: (string | number)[], value: unknown): void {
  let at = root as Record<string | number, unknown>;
  for (const key of path.slice(0, -1)) at = at[key] as Record<string | number, unknown>;
  at[path[path.length - 1] ?? ''] = value;
}

const failed = (v: BundleVerification) => v.checks.filter((c) => !c.ok).map((c) => c.name);

describe('verifyBundle', () => {
  it('passes every check of an intact bundle, and names them', async () => {
    const v = await verifyBundle(JSON.stringify(makeBundle()));
    expect(failed(v)).toEqual([]);
    expect(v.ok).toBe(true);
    expect(v.checks.map((c) => c.name)).toEqual([
      'parse',
      'bundle_type',
      'bundle_hash',
      'graph_structure',
      'job_binding',
      'event_hash[1]',
      'event_hash[2]',
      'event_hash[3]',
      'event_hash[4]',
      'merkle_root',
      'certificate_signature',
      'signer_key',
      'receipt_signature[rcpt_1]',
      'receipt_binding[rcpt_1]',
      'receipts_complete',
      'log',
    ]);
  });

  it('pins keys: the platform key passes, another key fails signer_key', async () => {
    const text = JSON.stringify(makeBundle());
    expect((await verifyBundle(text, { trustedKeys: [platformHex] })).ok).toBe(true);
    const other = await verifyBundle(text, { trustedKeys: [nodeHex] });
    expect(failed(other)).toEqual(['signer_key']);
    const retired = await verifyBundle(text, {
      trustedKeys: [{ public_key_hex: platformHex, valid_until: '2026-11-21T17:00:00.000Z' }],
    });
    expect(retired.checks.find((c) => c.name === 'signer_key')?.reason).toMatch(/after the key was retired/);
  });

  it.each<[string, (string | number)[], unknown, string[]]>([
    ['an event summary', ['evidence', 'events', 0, 'summary'], 'x', ['bundle_hash', 'event_hash[1]', 'merkle_root']],
    [
      'event metadata',
      ['evidence', 'events', 0, 'metadata', 'budget_cents'],
      101,
      ['bundle_hash', 'event_hash[1]', 'merkle_root'],
    ],
    ['an edge type', ['evidence', 'edges', 3, 'edge_type'], 'then', ['bundle_hash', 'event_hash[3]', 'merkle_root']],
    [
      'a receipt field',
      ['receipts', 0, 'metering_units'],
      8,
      ['bundle_hash', 'receipt_signature[rcpt_1]', 'receipt_binding[rcpt_1]'],
    ],
    ['the root', ['evidence', 'run', 'root_hash'], '0'.repeat(64), ['bundle_hash', 'merkle_root']],
    [
      'the certificate signature',
      ['evidence', 'certificate', 'signature_hex'],
      '0'.repeat(128),
      ['bundle_hash', 'certificate_signature'],
    ],
    ['the bundle hash', ['bundle_hash'], '0'.repeat(64), ['bundle_hash']],
  ])('altering %s fails exactly the checks that cover it', async (_, path, value, expected) => {
    const bundle = makeBundle();
    setAt(bundle, path, value);
    expect(failed(await verifyBundle(JSON.stringify(bundle)))).toEqual(expected);
  });

  it('refuses a receipt and a certificate forged under the identity key (R = identity, S = 0 verifies for any message)', async () => {
    const identity = `01${'00'.repeat(31)}`;
    const forged = `01${'00'.repeat(63)}`;
    const bundle = makeBundle();
    setAt(bundle, ['receipts', 0, 'node_public_key'], identity);
    setAt(bundle, ['receipts', 0, 'signature'], forged);
    for (const part of ['run', 'certificate'])
      setAt(bundle, ['evidence', part, part === 'run' ? 'root_signature_hex' : 'signature_hex'], forged);
    for (const part of ['run', 'certificate']) setAt(bundle, ['evidence', part, 'signer_public_key_hex'], identity);
    setAt(bundle, ['verifier', 'platform_keys', 0, 'public_key_hex'], identity);
    bundle.bundle_hash = bundleHash(bundle);
    const v = await verifyBundle(JSON.stringify(bundle));
    expect(v.ok).toBe(false);
    expect(v.checks.find((c) => c.name === 'receipt_signature[rcpt_1]')).toMatchObject({
      ok: false,
      reason: 'the node public key is a small-order point (order 1): signatures under it can be forged',
    });
    expect(v.checks.find((c) => c.name === 'certificate_signature')).toMatchObject({
      ok: false,
      reason: 'the signer public key is a small-order point (order 1): signatures under it can be forged',
    });
  });

  it('refuses duplicate keys, unknown types, oversized input and garbage', async () => {
    const text = JSON.stringify(makeBundle());
    expect(failed(await verifyBundle(text.replace('{"type":', '{"type":"x","type":')))).toEqual(['parse']);
    expect(failed(await verifyBundle(text.replace('svc.evidence_bundle.v1', 'svc.evidence_bundle.v9')))).toEqual([
      'bundle_type',
    ]);
    expect(failed(await verifyBundle(text, { maxBytes: 100 }))).toEqual(['parse']);
    expect((await verifyBundle('[]')).ok).toBe(false);
  });
});

const ORIGIN = 'svc.test/log';

/**
 * Adds `verifier.log` as the server writes it: the run's leaf as record 3 of a log of 6, the
 * inclusion proof, a checkpoint signed by `signer` (the platform key unless given) and the
 * bundle's note verifier keys. `doctor` edits the section before the bundle hash is recomputed.
 */
function withLog(
  bundle: Record<string, unknown>,
  options: { signer?: ReturnType<typeof generateEd25519>; doctor?: (log: Record<string, unknown>) => void } = {},
): Record<string, unknown> {
  const signer = options.signer ?? platform;
  const evidence = bundle.evidence as { run: Record<string, unknown>; events: unknown[] };
  const leaf = {
    run_id: evidence.run.id,
    subject_type: 'job',
    subject_id: evidence.run.job_id,
    root_hash: evidence.run.root_hash,
    event_count: evidence.events.length,
    closed_at: '2026-11-21T18:00:05.000Z',
  };
  const log = createMemoryLog();
  for (let i = 0; i < 3; i++) log.append(logRecordHash(Buffer.from(`another run ${i}`)));
  const leafHash = logRecordHash(Buffer.from(canonicalJson(leaf)));
  const index = log.append(leafHash);
  for (let i = 0; i < 2; i++) log.append(logRecordHash(Buffer.from(`a later run ${i}`)));
  const section: Record<string, unknown> = {
    origin: ORIGIN,
    checkpoint: signNote(checkpointText(ORIGIN, log.size(), log.root()), ORIGIN, signer.privateKey),
    leaf_index: index,
    leaf,
    leaf_hash: leafHash.toString('hex'),
    inclusion_proof: log.inclusionProof(log.size(), index).map((h) => h.toString('base64')),
    verifier_keys: [noteVerifierKey(ORIGIN, publicKeyHex(signer.privateKey))],
  };
  options.doctor?.(section);
  (bundle.verifier as Record<string, unknown>).log = section;
  bundle.bundle_hash = bundleHash(bundle);
  return bundle;
}

const LOG_CHECKS = ['log_leaf', 'log_leaf_hash', 'log_checkpoint_signature', 'log_inclusion'];

describe("verifyBundle: the run's entry in the transparency log (verifier.log)", () => {
  const checkOf = (v: BundleVerification, name: string) => v.checks.find((c) => c.name === name);

  it('passes a bundle whose leaf, hash, checkpoint and inclusion proof hold, each as its own check', async () => {
    const v = await verifyBundle(JSON.stringify(withLog(makeBundle())), { trustedKeys: [platformHex] });
    expect(failed(v)).toEqual([]);
    expect(v.checks.slice(-4).map((c) => [c.name, c.ok])).toEqual(LOG_CHECKS.map((n) => [n, true]));
    expect(checkOf(v, 'log_inclusion')?.reason).toBe('record 3 of 6');
    expect(checkOf(v, 'log_checkpoint_signature')?.reason).toMatch(
      /^tree of 6 signed by svc\.test\/log\+[0-9a-f]{8}, among the pinned keys$/,
    );
    // Unpinned, the bundle's own keys are trusted, and the check says so.
    const own = await verifyBundle(JSON.stringify(withLog(makeBundle())));
    expect(own.ok).toBe(true);
    expect(checkOf(own, 'log_checkpoint_signature')?.reason).toMatch(/among the bundle's own keys \(not pinned/);
    // A pinned note verifier key alone (--log-key) is enough.
    const byNoteKey = await verifyBundle(JSON.stringify(withLog(makeBundle())), {
      trustedLogKeys: [noteVerifierKey(ORIGIN, platformHex)],
    });
    expect(failed(byNoteKey)).toEqual([]);
    expect(checkOf(byNoteKey, 'log_checkpoint_signature')?.reason).toMatch(/among the pinned keys$/);
  });

  it.each<[string, (log: Record<string, unknown>) => void, string[]]>([
    [
      "a leaf whose root_hash is not the run's",
      (log) => ((log.leaf as Record<string, unknown>).root_hash = 'ab'.repeat(32)),
      ['log_leaf', 'log_leaf_hash', 'log_inclusion'],
    ],
    [
      "a leaf whose event_count is not the graph's",
      (log) => ((log.leaf as Record<string, unknown>).event_count = 5),
      ['log_leaf', 'log_leaf_hash', 'log_inclusion'],
    ],
    ['a wrong leaf index', (log) => (log.leaf_index = 2), ['log_inclusion']],
    [
      'a changed proof hash',
      (log) => ((log.inclusion_proof as string[])[1] = Buffer.alloc(32, 7).toString('base64')),
      ['log_inclusion'],
    ],
    ['a leaf hash that is not the leaf', (log) => (log.leaf_hash = '00'.repeat(32)), ['log_leaf_hash']],
    [
      'a checkpoint whose size does not cover the index',
      // Signed by the platform key, over a tree of 3: record 3 is not in it.
      (log) => (log.checkpoint = signNote(checkpointText(ORIGIN, 3, Buffer.alloc(32, 1)), ORIGIN, platform.privateKey)),
      ['log_inclusion'],
    ],
    [
      'a checkpoint text altered after signing',
      (log) => (log.checkpoint = String(log.checkpoint).replace('\n6\n', '\n7\n')),
      ['log_checkpoint_signature'],
    ],
  ])('%s fails, naming the check', async (_, doctor, expected) => {
    const v = await verifyBundle(JSON.stringify(withLog(makeBundle(), { doctor })), { trustedKeys: [platformHex] });
    expect(failed(v)).toEqual(expected);
    expect(v.ok).toBe(false);
  });

  it('names the reason: an index outside the tree, a proof that does not lead to the root', async () => {
    const short = await verifyBundle(
      JSON.stringify(
        withLog(makeBundle(), {
          doctor: (log) =>
            (log.checkpoint = signNote(checkpointText(ORIGIN, 3, Buffer.alloc(32, 1)), ORIGIN, platform.privateKey)),
        }),
      ),
      { trustedKeys: [platformHex] },
    );
    expect(checkOf(short, 'log_inclusion')?.reason).toBe("record 3 is not in the checkpoint's tree of 3 records");
    const moved = await verifyBundle(JSON.stringify(withLog(makeBundle(), { doctor: (log) => (log.leaf_index = 2) })), {
      trustedKeys: [platformHex],
    });
    expect(checkOf(moved, 'log_inclusion')?.reason).toBe(
      "the proof does not lead from the leaf's hash, as record 2, to the checkpoint's root",
    );
  });

  it('fails a checkpoint signed by another key, pinned or not, though the bundle lists that key', async () => {
    const other = generateEd25519();
    const text = JSON.stringify(withLog(makeBundle(), { signer: other }));
    const pinned = await verifyBundle(text, { trustedKeys: [platformHex] });
    expect(failed(pinned)).toEqual(['log_checkpoint_signature']);
    expect(checkOf(pinned, 'log_checkpoint_signature')?.reason).toBe(
      'no signature by a known key among the pinned keys',
    );
    // The bundle's own note key is not one of its platform keys: not trusted either.
    expect(failed(await verifyBundle(text))).toEqual(['log_checkpoint_signature']);
  });

  it('reports a bundle made before the log as absent (not a failure unless required) and a pending one as pending', async () => {
    const old = await verifyBundle(JSON.stringify(makeBundle()));
    expect(old.ok).toBe(true);
    expect(checkOf(old, 'log')).toMatchObject({ ok: true, status: 'absent' });
    const required = await verifyBundle(JSON.stringify(makeBundle()), { requireLog: true });
    expect(required.ok).toBe(false);
    expect(checkOf(required, 'log')).toMatchObject({ ok: false, status: 'absent' });
    expect(checkOf(required, 'log')?.reason).toMatch(/required \(--require-log\)$/);

    const pending = makeBundle();
    const leaf = withLog(makeBundle()).verifier as { log: { leaf: unknown } };
    (pending.verifier as Record<string, unknown>).log = { status: 'pending', leaf: leaf.log.leaf };
    pending.bundle_hash = bundleHash(pending);
    const v = await verifyBundle(JSON.stringify(pending));
    expect(v.checks.slice(-2).map((c) => [c.name, c.ok, c.status])).toEqual([
      ['log', true, 'pending'],
      ['log_leaf', true, undefined],
    ]);
    expect((await verifyBundle(JSON.stringify(pending), { requireLog: true })).ok).toBe(false);
  });
});

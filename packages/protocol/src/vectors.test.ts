import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  EVIDENCE_CERT_ALGORITHM,
  EVIDENCE_CERT_VERSION,
  MERKLE_EMPTY_ROOT,
  canonicalJson,
  canonicalSha256Hex,
  certificateMessage,
  eventHash,
  inclusionProof,
  leafHash,
  merkleRoot,
  privateKeyFromSeedHex,
  publicKeyHex,
  registerMessage,
  requestMessage,
  sha256Hex,
  signCertificate,
  signHex,
  signSvc1,
  svc1Message,
  verifyCertificate,
  verifyHex,
  verifyInclusion,
  verifySvc1,
  type EvidenceEventInput,
  type Svc1Fields,
} from './index.js';
import { certificateMessageBytes, merkleRootHex, svc1MessageBytes, verifyEd25519 } from './verify/index.js';

// The test vectors published in docs/ are read from the Markdown itself, so they cannot drift.
const receiptsDoc = readFileSync(new URL('../../../docs/receipts.md', import.meta.url), 'utf8');
const evidenceDoc = readFileSync(new URL('../../../docs/evidence.md', import.meta.url), 'utf8');

function block(doc: string, lang: 'json' | 'text', name: string): string {
  const match = new RegExp(`\`\`\`${lang} vector:${name}\\n([\\s\\S]*?)\\n\`\`\``).exec(doc);
  if (match?.[1] === undefined) throw new Error(`no ${lang} vector:${name} block`);
  return match[1];
}
// The blocks are our own documents; a missing field fails the assertions that use it.
const json = <T>(doc: string, name: string): T => JSON.parse(block(doc, 'json', name)) as T;

interface Svc1Vector {
  node_seed_hex: string;
  node_public_key_hex: string;
  result: string;
  fields: Svc1Fields;
  message_hex: string;
  signature_hex: string;
}

interface RegisterVector {
  pubkey: string;
  body: Record<string, unknown>;
  body_jcs: string;
  body_sha256_hex: string;
  message: string;
  signature_hex: string;
}

interface RequestVector {
  method: string;
  path_with_query: string;
  timestamp: string;
  body: string;
  body_sha256_hex: string;
  message: string;
  signature_hex: string;
}

interface EventVector {
  event: EvidenceEventInput;
  jcs: string;
  jcs_utf8_hex: string;
  event_hash: string;
}

interface MerkleVector {
  leaves: string[];
  empty_root: string;
  roots: Record<string, string>;
  inclusion: { n: number; index: number; leaf: string; proof: string[]; root: string };
}

interface CertificateVector {
  platform_seed_hex: string;
  platform_public_key_hex: string;
  algorithm: string;
  version: string;
  run_id: string;
  event_count: number;
  root_hash_hex: string;
  message: string;
  message_hex: string;
  signature_hex: string;
}

describe('docs/receipts.md', () => {
  const v = json<Svc1Vector>(receiptsDoc, 'svc1');
  const key = privateKeyFromSeedHex(v.node_seed_hex);

  it('SVC1: key, fields, message bytes and signature', () => {
    expect(v.node_seed_hex).toBe(Buffer.from(Array.from({ length: 32 }, (_, i) => i)).toString('hex'));
    expect(publicKeyHex(key)).toBe(v.node_public_key_hex);
    expect(v.fields.node_public_key_hex).toBe(v.node_public_key_hex);
    expect(v.fields.result_hash_hex).toBe(sha256Hex(v.result));
    expect(svc1Message(v.fields).toString('hex')).toBe(v.message_hex);
    expect(signSvc1(v.fields, key)).toBe(v.signature_hex);
    expect(verifySvc1(v.fields, v.signature_hex)).toBe(true);
  });

  it('SVC1: the part-by-part table concatenates to the message', () => {
    const table = receiptsDoc.slice(receiptsDoc.indexOf('| part | bytes (hex) |'));
    const parts = [...table.matchAll(/^\| [^|]+ \| `([0-9a-f]+)` \|$/gm)].map((m) => m[1]);
    expect(parts).toHaveLength(6);
    expect(parts.join('')).toBe(v.message_hex);
  });

  it('node registration', () => {
    const r = json<RegisterVector>(receiptsDoc, 'register');
    expect(r.pubkey).toBe(v.node_public_key_hex);
    expect(canonicalJson(r.body)).toBe(r.body_jcs);
    expect(canonicalSha256Hex(r.body)).toBe(r.body_sha256_hex);
    const message = registerMessage(r.pubkey, r.body);
    expect(message.toString('utf8')).toBe(r.message);
    expect(signHex(message, key)).toBe(r.signature_hex);
    expect(verifyHex(message, r.signature_hex, r.pubkey)).toBe(true);
  });

  it('signed node requests', () => {
    const requests = json<RequestVector[]>(receiptsDoc, 'requests');
    expect(requests).toHaveLength(2);
    for (const r of requests) {
      expect(sha256Hex(r.body)).toBe(r.body_sha256_hex);
      const { method, path_with_query: pathWithQuery, timestamp, body } = r;
      const message = requestMessage({ method, pathWithQuery, timestamp, body });
      expect(message.toString('utf8')).toBe(r.message);
      expect(signHex(message, key)).toBe(r.signature_hex);
    }
  });
});

describe('docs/evidence.md', () => {
  const events = json<EventVector[]>(evidenceDoc, 'events');

  it('event canonical JSON, its bytes and the event hashes', () => {
    expect(events).toHaveLength(2);
    for (const e of events) {
      expect(canonicalJson(e.event)).toBe(e.jcs);
      expect(Buffer.from(e.jcs, 'utf8').toString('hex')).toBe(e.jcs_utf8_hex);
      expect(eventHash(e.event)).toBe(e.event_hash);
      expect(leafHash(Buffer.from(e.jcs_utf8_hex, 'hex'))).toBe(e.event_hash);
    }
    expect(events[1]?.event.parents).toHaveLength(1);
    expect(block(evidenceDoc, 'text', 'event-2-jcs')).toBe(events[1]?.jcs);
  });

  it('the run root', () => {
    const run = json<{ event_hashes: string[]; root_hash: string }>(evidenceDoc, 'run-root');
    expect(run.event_hashes).toEqual(events.map((e) => e.event_hash));
    expect(merkleRoot(run.event_hashes)).toBe(run.root_hash);
  });

  it('Merkle roots over 1, 2, 3, 5 and 8 leaves, and an audit path', () => {
    const m = json<MerkleVector>(evidenceDoc, 'merkle');
    expect(m.leaves).toEqual(Array.from({ length: 8 }, (_, i) => leafHash(`leaf-${i}`)));
    expect(m.empty_root).toBe(MERKLE_EMPTY_ROOT);
    expect(Object.keys(m.roots)).toEqual(['1', '2', '3', '5', '8']);
    for (const [n, root] of Object.entries(m.roots)) expect(merkleRoot(m.leaves.slice(0, Number(n)))).toBe(root);
    const { n, index, leaf, proof, root } = m.inclusion;
    expect(leaf).toBe(m.leaves[index]);
    expect(root).toBe(m.roots[String(n)]);
    expect(inclusionProof(m.leaves.slice(0, n), index)).toEqual(proof);
    expect(verifyInclusion(leaf, index, n, proof, root)).toBe(true);
  });

  it('the certificate over the run', () => {
    const c = json<CertificateVector>(evidenceDoc, 'certificate');
    const key = privateKeyFromSeedHex(c.platform_seed_hex);
    expect(publicKeyHex(key)).toBe(c.platform_public_key_hex);
    expect([c.algorithm, c.version]).toEqual([EVIDENCE_CERT_ALGORITHM, EVIDENCE_CERT_VERSION]);
    expect(c.run_id).toBe(events[0]?.event.run_id);
    expect(c.event_count).toBe(events.length);
    expect(c.root_hash_hex).toBe(merkleRoot(events.map((e) => e.event_hash)));
    const fields = { run_id: c.run_id, event_count: c.event_count, root_hash_hex: c.root_hash_hex };
    const message = certificateMessage(fields);
    expect(message.toString('utf8')).toBe(c.message);
    expect(message.toString('hex')).toBe(c.message_hex);
    expect(signCertificate(fields, key)).toBe(c.signature_hex);
    expect(verifyCertificate(fields, c.signature_hex, c.platform_public_key_hex)).toBe(true);
  });
});

describe('the browser-safe verifier primitives agree with the vectors', () => {
  it('SVC1 message, Merkle roots and certificate', async () => {
    const v = json<Svc1Vector>(receiptsDoc, 'svc1');
    const message = svc1MessageBytes(v.fields);
    expect(message && Buffer.from(message).toString('hex')).toBe(v.message_hex);
    expect(await verifyEd25519(v.node_public_key_hex, message ?? new Uint8Array(), v.signature_hex)).toBe(true);
    const m = json<MerkleVector>(evidenceDoc, 'merkle');
    for (const [n, root] of Object.entries(m.roots))
      expect(await merkleRootHex(m.leaves.slice(0, Number(n)))).toBe(root);
    expect(await merkleRootHex([])).toBe(MERKLE_EMPTY_ROOT);
    const c = json<CertificateVector>(evidenceDoc, 'certificate');
    const cert = certificateMessageBytes(c.run_id, c.event_count, c.root_hash_hex);
    expect(Buffer.from(cert).toString('hex')).toBe(c.message_hex);
    expect(await verifyEd25519(c.platform_public_key_hex, cert, c.signature_hex)).toBe(true);
    expect(
      await verifyEd25519(
        c.platform_public_key_hex,
        cert,
        c.signature_hex.replace(/^./, (d) => (d === '0' ? '1' : '0')),
      ),
    ).toBe(false);
  });
});

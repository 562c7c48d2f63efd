/**
 * The hashing and canonical JSON of one gateway request, in process (no store, no sockets): the
 * work ticket's MAC, the policy id, the nine event hashes of a chat request's evidence run (its
 * opening's five, its closing's four), the run's Merkle root and its Ed25519 certificate. With
 * `--baseline <checkout>` the same work runs through that checkout's modules too, taking turns
 * in one process, and both must give the same root. Prints microseconds per request, the best
 * of `--rounds` rounds (the least disturbed by other processes). `--skip-sign` leaves out the
 * certificate's Ed25519 signature (about 35 us, the same in every checkout). A second table splits
 * this checkout's per-request cryptography by the DESIGN.md rule that asks for it, with the one
 * piece the bench above leaves out: the Ed25519 verification of the node's SVC1 receipt (section 9).
 *
 * @example
 * npx tsx bench/hashing.ts --baseline /tmp/base [--skip-sign] [--rounds 10] [--requests 4000]
 */
import { randomBytes } from 'node:crypto';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import type * as ProtocolModule from '../packages/protocol/src/index.js';
import type * as EventsModule from '../packages/server/src/modules/evidence/events.js';
import type * as TicketModule from '../packages/server/src/modules/gateway/ticket.js';
import { positiveInt, printTable } from './lib.js';

type Protocol = typeof ProtocolModule;
type Ticket = typeof TicketModule;
type Events = typeof EventsModule;
interface Modules {
  protocol: Protocol;
  ticket: Ticket;
  events: Events;
}

const { values } = parseArgs({
  options: {
    baseline: { type: 'string' },
    rounds: { type: 'string', default: '10' },
    requests: { type: 'string', default: '4000' },
    'skip-sign': { type: 'boolean', default: false },
  },
});
const rounds = positiveInt('rounds', values.rounds);
const perRound = positiveInt('requests', values.requests);

async function modulesOf(checkout: string): Promise<Modules> {
  const load = (path: string) => import(pathToFileURL(join(resolve(checkout), path)).href);
  return {
    protocol: (await load('packages/protocol/src/index.ts')) as Protocol,
    ticket: (await load('packages/server/src/modules/gateway/ticket.ts')) as Ticket,
    events: (await load('packages/server/src/modules/evidence/events.ts')) as Events,
  };
}

const secrets = { sessionSecret: randomBytes(32) };
const id = (prefix: string, i: number) => `${prefix}_01jd4x8k2m7q9w3e5r6t8y0u${i}a`;
const requestId = 'chatcmpl-01jd4x8k2m7q9w3e5r6t8y0u1a';
const node = { id: id('node', 1), country: 'US', region: 'us-east', gpu_model: null, attestation_verified: false };
const policy = {
  model: 'tinyllama',
  jurisdiction: null,
  strict_jurisdiction: 'US',
  requires_tee: false,
  stream: false,
};
const ticketFields = {
  org_id: id('org', 1),
  buyer_id: id('byr', 1),
  request_id: requestId,
  type: 'chat',
  model: 'tinyllama',
  stream: false,
  max_cost_micro: 40_000,
  jurisdiction: null,
  strict_jurisdiction: 'US',
  requires_tee: false,
  node_id: node.id,
  work_id: id('wrk', 1),
  issued_at: '2026-11-25T12:00:00.000Z',
};

/** One request's hashing through `m`; returns the run's root (equal across checkouts). */
function request(
  m: Modules,
  key: ReturnType<Protocol['generateEd25519']>['privateKey'],
  parts = { ticket: true, sign: !values['skip-sign'] },
): string {
  if (parts.ticket) m.ticket.issueTicket(secrets, ticketFields as Parameters<Ticket['issueTicket']>[1]);
  const policyId = m.events.policyId(policy);
  const events = [
    { type: 'request.received', metadata: { request_type: 'chat', model: 'tinyllama', stream: false } },
    // The gateway's call; a checkout whose policyEvaluated takes no id hashes the policy again.
    m.events.policyEvaluated(policy, 'a node serving tinyllama', policyId),
    m.events.ledgerHeld(id('hld', 1), 4, 'request.received'),
    ...m.events.routed(
      node,
      { reason: 'in US (strict_jurisdiction)', candidates: 2, eligible: 1, policy_id: policyId },
      { type: 'request.assigned', work_id: id('wrk', 1), attempt: 1 },
    ),
    ...m.events.receiptEvents(
      {
        id: id('rcp', 1),
        job_id: requestId,
        node_public_key: 'ab'.repeat(32),
        result_hash: 'cd'.repeat(32),
        metering_units: 4,
        signature: 'ef'.repeat(64),
        signature_version: 'SVC1',
      },
      node,
      id('wrk', 1),
    ),
    m.events.ledgerReleased(id('hld', 1), 3, 'ledger.held'),
    { type: 'request.completed', metadata: { status: 'completed', usage: { prompt_tokens: 3, completion_tokens: 1 } } },
  ];
  const hashes = events.map((e, i) =>
    m.protocol.eventHash({
      run_id: id('run', 1),
      sequence: i + 1,
      event_type: e.type,
      subject_id: requestId,
      summary: `event ${i + 1} of the request, a summary of ordinary length`,
      metadata: e.metadata ?? {},
      created_at: '2026-11-25T12:00:00.000Z',
      parents: i === 0 ? [] : [{ event_id: id('evt', i), edge_type: 'then' }],
    }),
  );
  const root = m.protocol.merkleRoot(hashes);
  if (!parts.sign) return root;
  m.protocol.signCertificate({ run_id: id('run', 1), event_count: hashes.length, root_hash_hex: root }, key);
  return root;
}

const head = await modulesOf('.');
const targets: [string, Modules][] = [['this checkout', head]];
if (values.baseline) targets.push([`baseline ${values.baseline}`, await modulesOf(values.baseline)]);
const key = head.protocol.generateEd25519().privateKey;
const roots = new Set(targets.map(([, m]) => request(m, key)));
if (roots.size !== 1) throw new Error('the checkouts disagree on the run root');

const best = new Map<string, number>();
for (let round = 0; round < rounds; round++) {
  for (const [name, m] of targets) {
    for (let i = 0; i < perRound / 10; i++) request(m, key);
    const started = performance.now();
    for (let i = 0; i < perRound; i++) request(m, key);
    const us = ((performance.now() - started) * 1000) / perRound;
    best.set(name, Math.min(best.get(name) ?? Infinity, us));
  }
}
printTable([
  ['target', 'us per request (best round)'],
  ...targets.map(([name]) => [name, (best.get(name) ?? 0).toFixed(1)]),
]);

// This checkout's parts, each the best of `rounds` rounds: what each rule costs one request.
const nodeKey = head.protocol.generateEd25519();
const receiptFields = {
  job_id: requestId,
  node_public_key_hex: head.protocol.publicKeyHex(nodeKey.publicKey),
  result_hash_hex: 'cd'.repeat(32),
  metering_units: 20,
};
const receiptSignature = head.protocol.signSvc1(receiptFields, nodeKey.privateKey);
if (!head.protocol.verifySvc1(receiptFields, receiptSignature)) throw new Error('the SVC1 receipt does not verify');
const parts: [string, () => unknown][] = [
  [
    "the node's SVC1 receipt verified (Ed25519, section 9)",
    () => head.protocol.verifySvc1(receiptFields, receiptSignature),
  ],
  [
    'the work ticket issued (HMAC-SHA256, section 4: rebuilds a lost opening)',
    () => head.ticket.issueTicket(secrets, ticketFields as Parameters<Ticket['issueTicket']>[1]),
  ],
  [
    'policy id, nine event hashes and their Merkle root (sections 11, 17)',
    () => request(head, key, { ticket: false, sign: false }),
  ],
];
const partBest = parts.map(() => Infinity);
for (let round = 0; round < rounds; round++) {
  parts.forEach(([, run], i) => {
    const n = Math.max(100, Math.floor(perRound / 4));
    for (let j = 0; j < n / 10; j++) run();
    const started = performance.now();
    for (let j = 0; j < n; j++) run();
    partBest[i] = Math.min(partBest[i] ?? Infinity, ((performance.now() - started) * 1000) / n);
  });
}
console.log('');
printTable([
  ['this checkout, by part', 'us per request (best round)'],
  ...parts.map(([name], i) => [name, (partBest[i] ?? 0).toFixed(1)]),
  ['sum', partBest.reduce((a, b) => a + b, 0).toFixed(1)],
]);

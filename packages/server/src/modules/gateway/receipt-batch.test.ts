import { createHash } from 'node:crypto';
import { COMPLETED_REQUEST_EVENTS } from '../../../test/gateway-events.js';
import { eventHash, merkleRoot, parentsOf, signSvc1 } from '@svc/protocol';
import { verifyBundle } from '@svc/protocol/verify';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  createKey,
  createTestApp,
  createTestNode,
  signUp,
  type TestApp,
  type TestNode,
} from '../../../test/harness.js';
import { onTransactionStatements } from '../../../test/transaction-spy.js';
import { newId } from '../../platform/ids.js';
import { rotatePlatformKey } from '../../platform/secrets.js';
import type { Principal } from '../../platform/principal.js';
import { reconcileAccount } from '../billing/service.js';
import { evidenceBundle, evidenceGraph } from '../evidence/service.js';
import { prepareChat } from './chat.js';
import { prepareEmbeddings } from './embeddings.js';
import { openRequest } from './service.js';
import { endRequest } from './settle.js';
import { findGatewayRequest } from './store.js';
import { findNode, type NodeRow } from '../nodes/store.js';
import { applyAlone, enqueueReceipt } from './flush.js';
import type { VerifiedReceipt } from '../work/completion.js';
import { receiptIdOf } from '../receipts/store.js';

/**
 * Gateway openings and completions written as batches (one flush of the writer each:
 * `writeOpenings`, `completeMany`) leave exactly the rows that today's one-by-one `writeOpening`
 * and `applyReceipt` leave: two identical worlds (two
 * buyers, one with paid and free-tier credit, one on a small balance whose free tier runs out;
 * an operator; chat and embeddings; usage with carries, a request costing nothing, a capped charge, a request
 * ended before its receipt), one applied one by one, the other in one flush, compared row by row
 * with ids, keys and times replaced by their order of appearance. A completed request's evidence
 * events are not rows (DESIGN.md section 11, revised 2026-11-27): they are compared as the
 * evidence service derives them when read, their hashes and root recomputed in each world.
 */

/** What each request asks and what its receipt says. */
interface Spec {
  buyer: 0 | 1;
  kind: 'chat' | 'embeddings';
  units: number;
  promptTokens?: number;
  /** Ended (cancelled) before its receipt: the receipt is refused 409. */
  ended?: boolean;
}

const SPECS: Spec[] = [
  { buyer: 0, kind: 'chat', units: 13_037, promptTokens: 12 },
  { buyer: 1, kind: 'chat', units: 21_900, promptTokens: 700 }, // the free tier runs out here
  { buyer: 0, kind: 'embeddings', units: 91 },
  { buyer: 1, kind: 'chat', units: 0 }, // costs nothing: no ledger row at all
  { buyer: 0, kind: 'chat', units: 5, promptTokens: 5 },
  { buyer: 1, kind: 'chat', units: 4_400, promptTokens: 3, ended: true }, // refused in the middle
  { buyer: 0, kind: 'chat', units: 30_282, promptTokens: 1 }, // its metering bound (30,282): the most it may sign
  { buyer: 1, kind: 'chat', units: 12_345, promptTokens: 345 },
  { buyer: 1, kind: 'embeddings', units: 278 }, // its metering bound
  { buyer: 0, kind: 'chat', units: 9_999, promptTokens: 0 },
];

// A world takes 30 s and more to build on a loaded machine: no lease or credit reservation may lapse
// in one world and not in the other (the work row `lost`, `reserved_cents` returned).
const ENV = {
  SVC_FREE_TIER_CENTS: '3',
  SVC_RATE_LIMIT_BURST: '100000',
  SVC_ORG_RATE_LIMIT_BURST: '100000',
  SVC_LEASE_SECONDS: '600',
  SVC_RESERVATION_TTL_MS: '3600000',
};

interface World {
  t: TestApp;
  orgs: string[];
  principals: Principal[];
  requestIds: string[];
  items: VerifiedReceipt[];
}

/**
 * How a world's openings are written. `one`: each in its own transaction (today's path).
 * `batched`: handed over with their work (as to a waiting poll) and written by flushes of the
 * writer, one up to each request to end (it must be in the store) and one for the rest.
 * `together`: as `batched`, but the openings after the last request to end stay queued in the
 * writer: the flush that writes the receipts writes them too (a request's opening waits for its
 * completion).
 */
type Mode = 'one' | 'batched' | 'together';

/**
 * Signs up the buyers and the operator, opens every request of `specs` (ending those marked
 * `ended` as soon as they are opened) and signs their receipts.
 */
async function buildWorld(mode: Mode, specs: readonly Spec[] = SPECS): Promise<World> {
  const batched = mode !== 'one';
  const t = await createTestApp({ env: { ...ENV, ...(batched ? { SVC_WRITER_FLUSH_MS: '60000' } : {}) } });
  const statements: string[] = [];
  if (batched) {
    vi.spyOn(t.ctx.jobSignal, 'reserve').mockImplementation(() => ({ deliver: () => true, release: () => undefined }));
    onTransactionStatements(t.ctx.db, (sql) => statements.push(sql));
  }
  const buyers = [await signUp(t.app), await signUp(t.app)];
  const operator = await signUp(t.app);
  const node = await createTestNode(t.app, await createKey(t.app, operator, ['operator']), {
    models: ['phi-4', 'all-MiniLM-L6-v2'],
  });
  await t.ctx.ledger.credit(buyers[0]?.orgId ?? '', 1_000, { txType: 'topup', description: 'card' });
  await t.ctx.ledger.credit(buyers[1]?.orgId ?? '', 40, { txType: 'topup', description: 'card' });
  const principals: Principal[] = buyers.map((b) => ({
    kind: 'key',
    orgId: b.orgId,
    buyerId: b.buyerId,
    role: 'owner',
    scopes: ['buyer'],
  }));
  const nodeRow = await findNode(t.ctx.db, node.nodeId);
  if (!nodeRow) throw new Error('no node row');
  const requestIds: string[] = [];
  const items: VerifiedReceipt[] = [];
  for (const [i, spec] of specs.entries()) {
    const call =
      spec.kind === 'chat'
        ? prepareChat({ model: 'phi-4', messages: [{ role: 'user', content: `question ${i}` }], max_tokens: 30_000 })
        : prepareEmbeddings({ model: 'all-MiniLM-L6-v2', input: `text ${i}` });
    const principal = principals[spec.buyer];
    if (!principal) throw new Error('no principal');
    await openRequest(t.ctx, principal, call, newId('wrk'));
    requestIds.push(call.id);
    if (spec.ended) {
      // Ending it needs its opening in the store: the openings queued so far are flushed first.
      if (batched) await t.ctx.writer.settled();
      await endRequest(t.ctx, call.id, { status: 'cancelled', error: 'client went away' });
    }
    items.push(signedReceipt(t.ctx, node, nodeRow, call, `result ${i}`, spec.units, spec.promptTokens));
  }
  if (batched) {
    // Every opening after the last request ended was queued behind its hand-over.
    const lastEnded = specs.map((s) => s.ended === true).lastIndexOf(true);
    expect(t.ctx.writer.pending).toBe(specs.length - lastEnded - 1);
  }
  if (mode === 'batched') {
    await t.ctx.writer.settled();
    // Two flushes (up to the request that ends, and the rest), each writing its openings as one batch.
    const flushes = specs.some((s) => s.ended) ? 2 : 1;
    expect(statements.filter((s) => s.startsWith('INSERT INTO gateway_requests'))).toHaveLength(flushes);
    // No hold rows (DESIGN.md section 7, revised 2026-11-27).
    expect(statements.filter((s) => s.includes('credit_holds'))).toHaveLength(0);
    expect(statements.filter((s) => s.startsWith('INSERT INTO work_items'))).toHaveLength(flushes);
    expect(statements.filter((s) => s.includes('INSERT INTO evidence_runs'))).toHaveLength(flushes);
  }
  vi.restoreAllMocks();
  return { t, orgs: [...buyers.map((b) => b.orgId), operator.orgId], principals, requestIds, items };
}

/** A node's signed receipt of `call` with its result inline, as the fast path queues it. */
function signedReceipt(
  ctx: TestApp['ctx'],
  node: Pick<TestNode, 'pubkey' | 'privateKey'>,
  nodeRow: NodeRow,
  call: { id: string; model: string },
  answer: string,
  units: number,
  promptTokens?: number,
): VerifiedReceipt {
  const output = JSON.stringify({ answer });
  const resultHash = createHash('sha256').update(output).digest('hex');
  const usage = promptTokens === undefined ? undefined : { prompt_tokens: promptTokens };
  const inline = {
    output,
    encoding: 'utf8' as const,
    content_type: 'application/json',
    result_hash: resultHash,
    metering_units: units,
    ...(usage ? { usage } : {}),
  };
  const fields = {
    job_id: call.id,
    node_public_key_hex: node.pubkey,
    result_hash_hex: resultHash,
    metering_units: units,
  };
  return {
    node: nodeRow,
    body: {
      job_id: call.id,
      pubkey: node.pubkey,
      result_hash: resultHash,
      signature: signSvc1(fields, node.privateKey),
      metering_units: units,
      metadata: { model: call.model, engine: 'test' },
      result: inline,
    },
    inline,
    inlineBytes: Buffer.from(output),
  };
}

/** Columns that differ between two runs of the same script whatever the code: times, sequence numbers, hashes over them. */
const VOLATILE = new Set([
  'created_at',
  'updated_at',
  'closed_at',
  'completed_at',
  'signed_at',
  'lease_expires_at',
  'dispatched_at',
  'seq',
  'event_hash',
  'root_hash',
  'root_signature_hex',
  'signer_public_key_hex',
  'signer_key_id',
  'expires_at',
]);
const ID =
  /\b(?:tx|hold|wrk|run|evt|rcpt|org|buy|node|key|chatcmpl|emb|x|pol|inst)[_-][0-9a-z]{10,}\b|\b[0-9a-f]{64,}\b/g;
// Routing counts the node's open work from the store: openings still queued in the writer are not
// counted, so this figure depends on when the openings commit, not on how they are written. It is
// in the request row's metadata (its opening facts: an object) and in text (event rows, summaries).
const OPEN_WORK = /(\\?")open_work\1:\d+|least loaded \(\d+ open\)/g;
const TIME = /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z/g;

/**
 * A request's evidence graph as the evidence service reads it (derived from the request's records
 * when its events are not rows, its certificate signed by this first read), for `snapshot` to
 * compare: each event's fields and parents, and when it is stamped (the request's opening, its
 * completion, or another time). Its hashes cover ids and times, which differ between two worlds:
 * they are checked here instead, every event hash recomputed from the fields compared and the
 * root over them equal to `root`, the one the flush stored.
 */
async function readGraph(w: World, principal: Principal, requestId: string, root: unknown): Promise<unknown[]> {
  const graph = await evidenceGraph(w.t.ctx, principal, requestId);
  const request = await findGatewayRequest(w.t.ctx.db, requestId);
  if (!request) throw new Error(`no request ${requestId}`);
  const withParents = graph.events.map((e) => ({ ...e, parents: parentsOf(e.id, graph.events, graph.edges) }));
  for (const e of withParents) expect(eventHash(e)).toBe(e.event_hash);
  expect(merkleRoot(withParents.map((e) => e.event_hash))).toBe(root);
  expect(graph.certificate).toMatchObject({ signed: true, verified: true, root_hash: root });
  const at = (t: string) =>
    t === request.created_at.toISOString()
      ? 'at opening'
      : t === request.completed_at?.toISOString()
        ? 'at completion'
        : t;
  // Every field but the hash (checked above) and the time, named by what it stamps.
  return withParents.map(({ event_hash: _hash, created_at, ...fields }) => ({ ...fields, at: at(created_at) }));
}

/**
 * Every row a completion touches, per request and per organization, and each request's evidence
 * as read, in an order that names no id.
 */
async function snapshot(w: World, specs: readonly Spec[] = SPECS): Promise<unknown[]> {
  const q = async (sql: string, params: unknown[]) =>
    (await w.t.ctx.db.query<Record<string, unknown>>(sql, params)).rows;
  const out: unknown[] = [];
  for (const [i, id] of w.requestIds.entries()) {
    const principal = w.principals[specs[i]?.buyer ?? 0];
    if (!principal) throw new Error('no principal');
    const run = await q('SELECT * FROM evidence_runs WHERE job_id = $1', [id]);
    out.push(
      await q('SELECT * FROM gateway_requests WHERE id = $1', [id]),
      await q('SELECT * FROM work_items WHERE job_id = $1 ORDER BY created_at', [id]),
      await q('SELECT * FROM receipts WHERE job_id = $1', [id]),
      await q('SELECT h.* FROM credit_holds h JOIN gateway_requests g ON g.hold_id = h.id WHERE g.id = $1', [id]),
      run,
      await q(
        'SELECT e.* FROM evidence_events e JOIN evidence_runs r ON r.id = e.run_id WHERE r.job_id = $1 ORDER BY e.sequence',
        [id],
      ),
      await q(
        `SELECT p.edge_type, f.sequence AS from_seq, t.sequence AS to_seq FROM evidence_events t
           CROSS JOIN LATERAL jsonb_to_recordset(t.parents::jsonb) AS p(event_id text, edge_type text)
           JOIN evidence_events f ON f.id = p.event_id JOIN evidence_runs r ON r.id = t.run_id
          WHERE r.job_id = $1 ORDER BY to_seq, from_seq, p.edge_type`,
        [id],
      ),
      await readGraph(w, principal, id, run[0]?.root_hash),
    );
  }
  for (const org of w.orgs) {
    out.push(
      await q('SELECT * FROM credit_accounts WHERE org_id = $1', [org]),
      await q('SELECT * FROM credit_transactions WHERE org_id = $1 ORDER BY seq', [org]),
    );
  }
  // A request's id by its place in the script, also inside the ids fixed by it (`run_<request id>`,
  // `evt_<request id>_<n>`); other ids, keys and times by order of appearance: equal snapshots
  // have the same shape of references.
  const names = new Map<string, string>();
  const text = w.requestIds.reduce(
    (all, id, i) => all.split(id).join(`request#${i}`),
    JSON.stringify(out, (key, value: unknown) => (VOLATILE.has(key) ? undefined : value)),
  );
  return JSON.parse(
    text
      .replace(OPEN_WORK, (_, q: string | undefined) =>
        // A count of 0 (a number) keeps the JSON whole, inside a string or not.
        q === undefined ? 'least loaded (OPEN_WORK)' : `${q}open_work${q}:0`,
      )
      .replace(TIME, 'TIME')
      .replace(ID, (id) => {
        const prefix = /^[0-9a-f]{64,}$/.test(id) ? 'hex' : id.split(/[_-]/)[0];
        if (!names.has(id)) names.set(id, `${prefix}#${names.size}`);
        return names.get(id) ?? id;
      }),
  ) as unknown[];
}

/** Ledger sums equal balances for every organization, and every request's evidence run verifies. */
async function expectWhole(
  w: World,
  specs: readonly Spec[] = SPECS,
  keys: readonly { public_key_hex: string }[] = [{ public_key_hex: w.t.ctx.secrets.active.public_key_hex }],
): Promise<void> {
  for (const org of w.orgs) expect((await reconcileAccount(w.t.ctx.db, org)).consistent).toBe(true);
  for (const [i, id] of w.requestIds.entries()) {
    const principal = w.principals[specs[i]?.buyer ?? 0];
    if (!principal) throw new Error('no principal');
    const bundle = await evidenceBundle(w.t.ctx, principal, id);
    const verified = await verifyBundle(bundle.text, { trustedKeys: keys });
    expect(verified.checks.filter((c) => !c.ok)).toEqual([]);
  }
}

/** The store's reads that lock a receipt's work, request or evidence run, with their parameters. */
const LOCKING_READ =
  /^SELECT .*(FROM work_items w WHERE w\.job_id|FROM gateway_requests WHERE id|FROM evidence_runs r WHERE r\.job_id)/s;

/** Which locking read `sql` is. */
function readOf(sql: string): string {
  if (sql.includes('FROM work_items w WHERE w.job_id = ANY')) return 'work of requests';
  if (sql.includes('FROM work_items w WHERE w.job_id = $1')) return 'work of a request';
  if (sql.includes('FROM gateway_requests WHERE id = ANY')) return 'requests';
  if (sql.includes('FROM gateway_requests WHERE id = $1')) return 'request';
  if (sql.includes('FROM evidence_runs r WHERE r.job_id = ANY')) return 'runs';
  return sql;
}

describe('gateway openings and receipts written as batches', () => {
  let one: World;
  let many: World;
  let together: World;
  let oneByOne: Promise<unknown[]> | undefined;
  beforeAll(async () => {
    one = await buildWorld('one');
    many = await buildWorld('batched');
    together = await buildWorld('together');
  }, 180_000);
  afterAll(async () => {
    vi.restoreAllMocks();
    await one?.t.close();
    await many?.t.close();
    await together?.t.close();
  });
  /** Today's path in the world `one`: each receipt applied by applyReceipt, one transaction each (once). */
  const applyOneByOne = () =>
    (oneByOne ??= (async () => {
      const out = [];
      for (const item of one.items) out.push(await one.t.ctx.db.transaction((tx) => applyAlone(one.t.ctx, tx, item)));
      return out;
    })());

  it('leave the same rows, ledger amounts and evidence as today’s one-by-one paths, the refused receipt alone refused', async () => {
    const oneByOne = await applyOneByOne();
    // The batch: every receipt queued at once, written by one flush.
    const statements: string[] = [];
    onTransactionStatements(many.t.ctx.db, (sql) => statements.push(sql));
    const queued = Promise.allSettled(many.items.map((item) => enqueueReceipt(many.t.ctx, item)));
    await many.t.ctx.writer.settled();
    const settled = await queued;
    vi.restoreAllMocks();

    const refused = SPECS.findIndex((s) => s.ended);
    expect(settled.map((s) => s.status)).toEqual(SPECS.map((s) => (s.ended ? 'rejected' : 'fulfilled')));
    const reason = (settled[refused] as PromiseRejectedResult).reason as Error;
    expect(reason.message).toBe(
      `gateway request ${many.requestIds[refused]} is cancelled; no receipt is accepted for this work`,
    );
    expect(oneByOne[refused]).toMatchObject({
      error: { message: reason.message.replace(many.requestIds[refused] ?? '', one.requestIds[refused] ?? '') },
    });
    // One flush: one insert of all the receipts, one ledger write, one evidence write.
    expect(statements.filter((s) => s.startsWith('INSERT INTO receipts'))).toHaveLength(1);
    expect(statements.filter((s) => s.includes('INSERT INTO credit_transactions')).length).toBe(1);
    expect(statements.filter((s) => s.includes('UPDATE evidence_runs')).length).toBe(1);
    // Their events are derived when read: no event row is written.
    expect(statements.filter((s) => s.includes('INSERT INTO evidence_events'))).toEqual([]);
    // The receipt ids are those the client was answered with: derived from the work ids.
    for (const s of settled) if (s.status === 'fulfilled') expect(s.value.id).toBe(receiptIdOf(s.value.work_id));

    expect(await snapshot(many)).toEqual(await snapshot(one));
    // The script covers what it claims: whole cents moved with carries, free-tier credit spent
    // and earned, a request costing nothing; a receipt at its metering bound, charged less than
    // its maximum cost (a signed receipt can no longer reach the cap: issue 40 point 6).
    const ledger = (
      await many.t.ctx.db.query<{ tx_type: string; amount_cents: number; amount_micro: number; free_micro: number }>(
        'SELECT tx_type, amount_cents, amount_micro, free_micro FROM credit_transactions',
      )
    ).rows;
    const charges = ledger.filter((r) => r.tx_type === 'charge');
    expect(charges).toHaveLength(SPECS.filter((s) => !s.ended && s.units > 0).length);
    expect(charges.filter((r) => r.amount_cents < 0).length).toBeGreaterThanOrEqual(4);
    expect(charges.some((r) => r.amount_micro !== r.amount_cents * 10_000)).toBe(true);
    expect(charges.some((r) => r.free_micro < 0 && r.free_micro > r.amount_micro)).toBe(true); // free tier ran out mid-charge
    expect(ledger.some((r) => r.tx_type === 'earning' && r.free_micro > 0)).toBe(true);
    // No hold, so nothing is released (DESIGN.md section 7, revised 2026-11-27).
    expect(ledger.filter((r) => ['hold', 'release'].includes(r.tx_type))).toEqual([]);
    const capped = await many.t.ctx.db.query<{ capped: boolean }>(
      "SELECT g.charged_micro = (g.metadata->'credit'->>'cents')::bigint * 10000 AS capped FROM gateway_requests g WHERE g.id = $1",
      [many.requestIds[6]],
    );
    expect(capped.rows).toEqual([{ capped: false }]);

    await expectWhole(many);
  }, 120_000);

  it('a flush holding openings and their receipts takes those as inserted (no locking read), the others as stored: the same rows', async () => {
    await applyOneByOne();
    // Queued: the openings after the request that ended (6 to 9); 0 to 5 are in the store.
    const fresh = together.requestIds.slice(6);
    expect(together.t.ctx.writer.pending).toBe(fresh.length);
    const reads: { sql: string; params: readonly unknown[] }[] = [];
    const statements: string[] = [];
    onTransactionStatements(together.t.ctx.db, (sql, params) => {
      statements.push(sql);
      if (LOCKING_READ.test(sql)) reads.push({ sql, params: params ?? [] });
    });
    const queued = Promise.allSettled(together.items.map((item) => enqueueReceipt(together.t.ctx, item)));
    await together.t.ctx.writer.settled();
    const settled = await queued;
    vi.restoreAllMocks();
    expect(settled.map((s) => s.status)).toEqual(SPECS.map((s) => (s.ended ? 'rejected' : 'fulfilled')));
    // One flush: the openings, then every receipt, each table written by one statement.
    expect(statements.filter((s) => s.startsWith('INSERT INTO gateway_requests'))).toHaveLength(1);
    expect(statements.filter((s) => s.startsWith('INSERT INTO receipts'))).toHaveLength(1);
    // The requests opened in the store are locked and read (the refused one too: it is alone
    // refused, under a savepoint); none of those this flush opened. Their evidence runs are not
    // read: a derived run's closing names it by its request (`run_<request id>`).
    const stored = together.requestIds.slice(0, 6);
    const ended = together.requestIds[5];
    expect(reads.map((r) => readOf(r.sql))).toEqual(['work of requests', 'requests', 'work of a request', 'request']);
    expect([...((reads[0]?.params[0] as string[]) ?? [])].sort()).toEqual([...stored].sort());
    expect([...((reads[1]?.params[0] as string[]) ?? [])].sort()).toEqual([...stored].sort());
    expect(reads.slice(2).map((r) => r.params[0])).toEqual([ended, ended]);
    for (const r of reads) for (const id of fresh) expect(JSON.stringify(r.params)).not.toContain(id);

    expect(await snapshot(together)).toEqual(await snapshot(one));
    await expectWhole(together);
  }, 120_000);

  it('a flush of openings with all their receipts writes each record once, completed, with no locking read; a second receipt of one of them is 409 alone', async () => {
    const specs = SPECS.filter((s) => !s.ended);
    const w = await buildWorld('together', specs);
    try {
      expect(w.t.ctx.writer.pending).toBe(specs.length);
      const reads: { sql: string; params: readonly unknown[] }[] = [];
      const statements: string[] = [];
      onTransactionStatements(w.t.ctx.db, (sql, params) => {
        statements.push(sql.replace(/\s+/g, ' ').trim());
        if (LOCKING_READ.test(sql)) reads.push({ sql, params: params ?? [] });
      });
      const [again] = w.items;
      if (!again) throw new Error('no receipt');
      const queued = Promise.allSettled([...w.items, again].map((item) => enqueueReceipt(w.t.ctx, item)));
      await w.t.ctx.writer.settled();
      const settled = await queued;
      vi.restoreAllMocks();
      expect(settled.map((s) => s.status)).toEqual([...specs.map(() => 'fulfilled'), 'rejected']);
      const reason = (settled[specs.length] as PromiseRejectedResult).reason as Error;
      expect(reason.message).toBe(`a receipt for ${w.requestIds[0]} was already accepted`);
      // The one locking read is the second receipt's, alone; the batch read nothing back.
      expect(reads.map((r) => [readOf(r.sql), r.params[0]])).toEqual([['work of a request', w.requestIds[0]]]);
      // Each record written once, already completed: no update of what the flush inserted.
      const count = (re: RegExp) => statements.filter((sql) => re.test(sql)).length;
      expect(count(/^INSERT INTO gateway_requests .*'completed'/)).toBe(1);
      expect(count(/^INSERT INTO gateway_requests/)).toBe(1);
      expect(count(/^INSERT INTO work_items .*'completed'/)).toBe(1);
      expect(count(/^INSERT INTO work_items/)).toBe(1);
      expect(count(/^INSERT INTO receipts/)).toBe(1);
      expect(count(/INSERT INTO evidence_runs .*'signed'/)).toBe(1);
      expect(count(/INSERT INTO evidence_runs/)).toBe(1);
      expect(count(/INSERT INTO credit_transactions/)).toBe(1);
      expect(count(/FROM credit_accounts .*FOR UPDATE/)).toBe(1);
      expect(count(/^UPDATE (work_items|gateway_requests|evidence_runs|credit_holds|credit_accounts)/)).toBe(0);
      expect(count(/UPDATE evidence_runs/)).toBe(0);
      expect(count(/INSERT INTO evidence_events/)).toBe(0);
      expect(w.t.logs.text()).not.toContain('retrying');
      const { rows } = await w.t.ctx.db.query<{ n: number }>(
        "SELECT count(*)::int AS n FROM gateway_requests WHERE status = 'completed' AND receipt_id IS NOT NULL",
      );
      expect(rows).toEqual([{ n: specs.length }]);
      const charges = await w.t.ctx.db.query<{ ref: string; n: number }>(
        "SELECT ref, count(*)::int AS n FROM credit_transactions WHERE tx_type = 'charge' GROUP BY ref",
      );
      expect(charges.rows.every((r) => r.n === 1)).toBe(true);
      expect(charges.rows).toHaveLength(specs.filter((s) => s.units > 0).length);
      // No event row: the whole graph is derived when read.
      const eventRows = await w.t.ctx.db.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM evidence_events e JOIN evidence_runs r ON r.id = e.run_id WHERE r.job_id = ANY($1)',
        [w.requestIds],
      );
      expect(eventRows.rows).toEqual([{ n: 0 }]);
      const [first, principal] = [w.requestIds[0], w.principals[specs[0]?.buyer ?? 0]];
      if (!first || !principal) throw new Error('no request');
      const graph = await evidenceGraph(w.t.ctx, principal, first);
      expect(graph.events.map((e) => e.event_type)).toEqual(COMPLETED_REQUEST_EVENTS);
      await expectWhole(w, specs);
    } finally {
      vi.restoreAllMocks();
      await w.t.close();
    }
  }, 120_000);

  it('a platform key rotated meanwhile: the runs inserted whole are unsigned, and the first read signs each with the new key', async () => {
    const specs = SPECS.filter((s) => !s.ended).slice(0, 2);
    const w = await buildWorld('together', specs);
    try {
      const old = w.t.ctx.secrets.active.key_id;
      // Another process rotates the key; this one still holds the old one when the flush writes and
      // when the first read signs.
      const { active, retired } = await rotatePlatformKey(w.t.ctx.db);
      expect(active.key_id).not.toBe(old);
      const queued = Promise.all(w.items.map((item) => enqueueReceipt(w.t.ctx, item)));
      await w.t.ctx.writer.settled();
      expect(await queued).toHaveLength(specs.length);
      expect(w.t.logs.text()).not.toContain('retrying');
      const runs = () =>
        w.t.ctx.db.query<{
          job_id: string;
          status: string;
          root_signature_hex: string | null;
          signer_key_id: string | null;
        }>(
          'SELECT job_id, status, root_signature_hex, signer_key_id FROM evidence_runs WHERE job_id = ANY($1::text[]) ORDER BY job_id',
          [w.requestIds],
        );
      // Closed by the flush, signed by nobody yet: the certificate is signed when first read.
      expect((await runs()).rows.map((r) => [r.status, r.root_signature_hex, r.signer_key_id])).toEqual(
        specs.map(() => ['signed', null, null]),
      );
      expect(w.t.ctx.secrets.active.key_id).toBe(old);
      for (const [i, id] of w.requestIds.entries()) {
        const principal = w.principals[specs[i]?.buyer ?? 0];
        if (!principal) throw new Error('no principal');
        const { certificate } = await evidenceGraph(w.t.ctx, principal, id);
        expect(certificate).toMatchObject({
          signed: true,
          verified: true,
          key_id: active.key_id,
          signer_public_key_hex: active.public_key_hex,
        });
      }
      // The old key was refused as retired, the active one read and used.
      expect(w.t.ctx.secrets.active.key_id).toBe(active.key_id);
      const { rows } = await runs();
      expect(rows.map((r) => r.signer_key_id)).toEqual(specs.map(() => active.key_id));
      expect(rows.every((r) => /^[0-9a-f]{128}$/.test(r.root_signature_hex ?? ''))).toBe(true);
      // Bundles verify with the platform's keys (`keys/platform` lists both): the certificates are
      // the new key's (above), while a log checkpoint cut before this process reloaded its key is
      // the old one's (under load it can be).
      await expectWhole(w, specs, [active, ...(retired ? [retired] : [])]);
    } finally {
      await w.t.close();
    }
  }, 60_000);

  it.each([
    ['alone in their flush', false],
    ['with their receipts in the flush', true],
  ])(
    'openings %s whose promised credit a hold took meanwhile in the store: all written in one batch (no hold to refuse: DESIGN.md section 7), charged from what is there',
    async (_, withReceipts) => {
      const t = await createTestApp({ env: { ...ENV, SVC_WRITER_FLUSH_MS: '60000' } });
      try {
        const buyer = await signUp(t.app);
        // 6 cents: three maximum costs of 2 cents each (tinyllama, max_tokens 8), taken in memory.
        await t.ctx.ledger.credit(buyer.orgId, 3, { txType: 'topup', description: 'card' });
        const node = await createTestNode(t.app, await createKey(t.app, await signUp(t.app), ['operator']), {
          models: ['tinyllama'],
        });
        const nodeRow = await findNode(t.ctx.db, node.nodeId);
        if (!nodeRow) throw new Error('no node row');
        vi.spyOn(t.ctx.jobSignal, 'reserve').mockImplementation(() => ({
          deliver: () => true,
          release: () => undefined,
        }));
        const principal: Principal = {
          kind: 'key',
          orgId: buyer.orgId,
          buyerId: buyer.buyerId,
          role: 'owner',
          scopes: ['buyer'],
        };
        const ids: string[] = [];
        const receipts: VerifiedReceipt[] = [];
        for (let i = 0; i < 3; i++) {
          const call = prepareChat({
            model: 'tinyllama',
            messages: [{ role: 'user', content: `q${i}` }],
            max_tokens: 8,
          });
          await openRequest(t.ctx, principal, call, newId('wrk'));
          ids.push(call.id);
          receipts.push(signedReceipt(t.ctx, node, nodeRow, call, `a${i}`, 282, 3)); // its metering bound
        }
        const applied = withReceipts
          ? Promise.allSettled(receipts.map((item) => enqueueReceipt(t.ctx, item)))
          : Promise.resolve([]);
        // Meanwhile a hold of 1 cent takes part of the credit the three openings were promised in memory.
        await t.ctx.db.transaction((tx) => t.ctx.ledger.within(tx).hold(buyer.orgId, 1, 'elsewhere'));
        // Only the writer's request inserts: background ticks run transactions of their own meanwhile.
        const inserts: string[] = [];
        onTransactionStatements(t.ctx.db, (sql) => sql.startsWith('INSERT INTO gateway_requests') && inserts.push(sql));
        await t.ctx.writer.settled();
        vi.restoreAllMocks();
        // Before 2026-11-28 the openings' holds no longer fitted: the flush failed and was retried
        // item by item, and the third request was refused after its node had done the work. Now
        // the flush writes no hold: one batch, every request stored (with its receipt, completed).
        expect(inserts.map((sql) => (sql.includes('unnest') ? 'batch' : 'alone'))).toEqual(['batch']);
        const outcomes = await applied;
        expect(outcomes.map((o) => o.status)).toEqual(withReceipts ? ['fulfilled', 'fulfilled', 'fulfilled'] : []);
        const { rows } = await t.ctx.db.query<{ id: string; status: string }>(
          'SELECT id, status FROM gateway_requests WHERE id = ANY($1) ORDER BY id',
          [ids],
        );
        expect(rows).toEqual([...ids].sort().map((id) => ({ id, status: withReceipts ? 'completed' : 'running' })));
        // The 1-cent hold is the only one; each completed request has its charge (less than a cent,
        // carried) and nothing else on the buyer's ledger.
        expect(await t.ctx.ledger.balance(buyer.orgId)).toMatchObject({ balance_cents: 6, held_cents: 1 });
        const ledger = await t.ctx.db.query<{ ref: string; tx_type: string }>(
          'SELECT ref, tx_type FROM credit_transactions WHERE org_id = $1 AND ref = ANY($2) ORDER BY ref',
          [buyer.orgId, ids],
        );
        expect(ledger.rows).toEqual(withReceipts ? [...ids].sort().map((ref) => ({ ref, tx_type: 'charge' })) : []);
        expect((await reconcileAccount(t.ctx.db, buyer.orgId)).consistent).toBe(true);
      } finally {
        vi.restoreAllMocks();
        await t.close();
      }
    },
    60_000,
  );
});

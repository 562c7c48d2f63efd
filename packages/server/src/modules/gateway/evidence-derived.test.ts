import { merkleRoot } from '@svc/protocol';
import { COMPLETED_REQUEST_EVENTS } from '../../../test/gateway-events.js';
import { verifyBundle } from '@svc/protocol/verify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startGatewayFixture, type GatewayFixture } from '../../../test/gateway-fixture.js';
import type { LedgerRow } from '../billing/store.js';
import { derivedEventRows, storeDerivedRun } from '../evidence/recorder.js';
import type { EventRow } from '../evidence/store.js';
import { receiptsOfJob } from '../receipts/store.js';
import { batchesOf, derivedRunId } from './evidence-derived.js';
import { findGatewayRequest, setRequestMetadata } from './store.js';

/**
 * DESIGN.md section 11 (revised 2026-11-27): a gateway request's events are derived from its
 * records when read, not stored; its root enters the log as it closes; its certificate is signed
 * when first read.
 */
describe('gateway runs without event rows', () => {
  let f: GatewayFixture;
  beforeAll(async () => {
    f = await startGatewayFixture();
    await f.addNode({ country: 'CA', region: 'ca-central' });
  });
  afterAll(() => f.close());

  const db = () => f.server.ctx.db;
  const chat = async (content: string) =>
    (await f.openai().chat.completions.create({ model: 'tinyllama', messages: [{ role: 'user', content }] })).id;
  const count = async (sql: string, params: unknown[]) =>
    (await db().query<{ n: number }>(sql, params)).rows[0]?.n ?? -1;
  const runRow = async (id: string) =>
    (
      await db().query<{
        id: string;
        root_hash: string | null;
        root_signature_hex: string | null;
        event_count: number;
      }>('SELECT id, root_hash, root_signature_hex, event_count FROM evidence_runs WHERE job_id = $1', [id])
    ).rows[0];
  /** The request's run once closed: its completion is written behind the answer. */
  const closedRun = async (id: string) => {
    for (let i = 0; i < 100; i++) {
      const n = await count("SELECT count(*)::int AS n FROM evidence_runs WHERE job_id = $1 AND status = 'signed'", [
        id,
      ]);
      if (n === 1) return runRow(id);
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`the run of ${id} did not close`);
  };
  const ledgerRows = async (id: string) =>
    (
      await db().query<LedgerRow>(
        `SELECT id, tx_type, amount_cents, amount_micro, free_micro, hold_cents, balance_after, description, ref, created_at
           FROM credit_transactions WHERE ref = $1 ORDER BY seq`,
        [id],
      )
    ).rows;

  it('writes no event row and no signature; the first read signs, later reads are the same bytes, svc verify checks the log', async () => {
    const id = await chat('derive me');
    const run = await closedRun(id);
    expect(run).toMatchObject({ id: derivedRunId(id), event_count: 8, root_signature_hex: null });
    expect(await count('SELECT count(*)::int AS n FROM evidence_events WHERE run_id = $1', [run?.id])).toBe(0);
    // The root entered the log with the request's records.
    expect(
      await count('SELECT count(*)::int AS n FROM log_leaves WHERE run_id = $1 AND root_hash = $2', [
        run?.id,
        run?.root_hash,
      ]),
    ).toBe(1);

    const first = (await f.api('GET', `/api/v1/jobs/${id}/evidence`)).json as {
      events: { event_type: string; event_hash: string; created_at: string }[];
      certificate: Record<string, unknown>;
    };
    expect(first.events.map((e) => e.event_type)).toEqual(COMPLETED_REQUEST_EVENTS);
    expect(merkleRoot(first.events.map((e) => e.event_hash))).toBe(run?.root_hash);
    expect(first.certificate).toMatchObject({ signed: true, verified: true, root_hash: run?.root_hash });
    const signature = (await runRow(id))?.root_signature_hex;
    expect(signature).toMatch(/^[0-9a-f]{128}$/);
    const again = (await f.api('GET', `/api/v1/jobs/${id}/evidence`)).text;
    expect(again).toBe(JSON.stringify(first));

    const keys = (await f.api('GET', '/api/v1/keys/platform')).json.keys as { public_key_hex: string }[];
    const bundle = (await f.api('GET', `/api/v1/jobs/${id}/evidence/bundle`)).text;
    const verified = await verifyBundle(bundle, { trustedKeys: keys, requireLog: true });
    expect(verified.checks.filter((c) => !c.ok)).toEqual([]);
    expect(verified.checks.map((c) => c.name)).toContain('log_leaf');
  });

  it('derives exactly the events the old recorder stored for the same records (a run recorded the old way and its twin)', async () => {
    f.server.ctx.config.log.gatewayEventRows = true;
    let id: string;
    try {
      id = await chat('record me the old way');
    } finally {
      f.server.ctx.config.log.gatewayEventRows = false;
    }
    const run = await closedRun(id);
    const { rows: stored } = await db().query<EventRow>(
      'SELECT * FROM evidence_events WHERE run_id = $1 ORDER BY sequence',
      [run?.id],
    );
    expect(stored).toHaveLength(8);
    expect(run?.root_signature_hex).toMatch(/^[0-9a-f]{128}$/);
    // An old run reads from its rows.
    const graph = (await f.api('GET', `/api/v1/jobs/${id}/evidence`)).json as { events: { id: string }[] };
    expect(graph.events.map((e) => e.id)).toEqual(stored.map((e) => e.id));

    // Its twin: the events derived from its request, receipt and ledger rows, with the ids and
    // timestamps the old recorder gave them (random ids, the clock at each write).
    const request = await findGatewayRequest(db(), id);
    if (!request || !run) throw new Error('the request was not recorded');
    const batches = batchesOf(request, await receiptsOfJob(db(), request.org_id, id), await ledgerRows(id));
    const twin = derivedEventRows(run.id, id, batches ?? [], (sequence) => {
      const old = stored[sequence - 1];
      return { id: old?.id ?? '', created_at: old?.created_at ?? '' };
    });
    const fields = (e: EventRow) => ({
      sequence: e.sequence,
      event_type: e.event_type,
      summary: e.summary,
      metadata: JSON.parse(e.metadata) as unknown,
      parents: JSON.parse(e.parents) as unknown,
      event_hash: e.event_hash,
    });
    expect(twin.map(fields)).toEqual(stored.map(fields));
    expect(merkleRoot(twin.map((e) => e.event_hash))).toBe(run.root_hash);
  });

  it('reads a derived run and the same events stored as rows as the same graph and bundle graph, byte for byte', async () => {
    const id = await chat('twin me');
    await closedRun(id);
    // Everything but the run's updated_at (storing rows moves it).
    const stable = (graph: { run: Record<string, unknown> }) =>
      JSON.stringify({ ...graph, run: { ...graph.run, updated_at: null } });
    const graphOf = async () =>
      stable((await f.api('GET', `/api/v1/jobs/${id}/evidence`)).json as { run: Record<string, unknown> });
    const bundleGraph = async () =>
      stable(
        (
          JSON.parse((await f.api('GET', `/api/v1/jobs/${id}/evidence/bundle`)).text) as {
            evidence: { run: Record<string, unknown> };
          }
        ).evidence,
      );
    const derived = [await graphOf(), await bundleGraph()];
    // Stored as the old recorder would store them: rows, and the request marked as recorded so.
    const request = await findGatewayRequest(db(), id);
    if (!request) throw new Error('no request');
    const batches = batchesOf(request, await receiptsOfJob(db(), request.org_id, id), await ledgerRows(id)) ?? [];
    await db().transaction(async (tx) => {
      await storeDerivedRun(tx, derivedRunId(id), id, batches);
      await setRequestMetadata(tx, id, {
        ...request.metadata,
        evidence: { ...(request.metadata.evidence as object), stored: true },
      });
    });
    expect(await count('SELECT count(*)::int AS n FROM evidence_events WHERE run_id = $1', [derivedRunId(id)])).toBe(8);
    expect([await graphOf(), await bundleGraph()]).toEqual(derived);
  });
});

import { afterEach, describe, expect, it } from 'vitest';
import { COMPLETED_REQUEST_EVENTS } from '../../../test/gateway-events.js';
import { eventually, startGatewayFixture, type GatewayFixture } from '../../../test/gateway-fixture.js';
import { watchPolls } from '../../../test/waits.js';
import { verifyBundle } from '@svc/protocol/verify';
import type { Db } from '../../platform/db/index.js';

/** Records the statements of every transaction on `db` from now on (`params`: each one's parameters as JSON). */
function recordTransactions(db: Db): string[][] & { params: string[][] } {
  const seen = Object.assign([] as string[][], { params: [] as string[][] });
  const transaction = db.transaction.bind(db);
  db.transaction = (fn) =>
    transaction((tx) => {
      const statements: string[] = [];
      const params: string[] = [];
      seen.push(statements);
      seen.params.push(params);
      return fn({
        query: (sql, values) => (
          statements.push(sql.replace(/\s+/g, ' ')),
          params.push(JSON.stringify(values ?? [])),
          tx.query(sql, values)
        ),
        exec: (sql) => (statements.push(sql), params.push('[]'), tx.exec(sql)),
      });
    });
  return seen;
}

const CHAT = { model: 'tinyllama', messages: [{ role: 'user' as const, content: 'one transaction' }] };

/**
 * Which of the recorded transactions inserted the request `id`'s row (its opening, or its opening
 * and completion together) and which one inserted its receipt (by their statements' parameters:
 * no opening row is left unchanged by the completion to tell it by its `xmin`, now that there is
 * no hold row).
 */
function transactionsOf(seen: ReturnType<typeof recordTransactions>, id: string) {
  const find = (insert: string) => {
    const at = seen.findIndex((statements, t) =>
      statements.some((sql, i) => sql.startsWith(insert) && (seen.params[t]?.[i] ?? '').includes(`"${id}"`)),
    );
    return at < 0 ? undefined : at;
  };
  return { opening: find('INSERT INTO gateway_requests'), receipt: find('INSERT INTO receipts') };
}

/** docs/gateway.md, "A request's opening waits for its completion". */
describe("a handed-over request's opening waits in the writer for its completion", () => {
  let f: GatewayFixture | undefined;
  afterEach(async () => {
    await f?.close();
    f = undefined;
  });

  it('one at a time, each request commits its opening and its completion in one transaction', async () => {
    // A wait no request outlasts (a cold test process can take more than the default 50 ms).
    f = await startGatewayFixture({ env: { SVC_WRITER_OPENING_WAIT_MS: '60000' } });
    const polls = watchPolls(f.server.ctx);
    await f.addNode({ channel: true });
    await polls.until(1);
    // A read through the instance (read-your-writes) or anyone needing the request in the store
    // flushes at once; a request during which that happened may commit in two transactions.
    const transactions = recordTransactions(f.server.ctx.db);
    const writer = f.server.ctx.writer;
    let forced = 0;
    const settled = writer.settled.bind(writer);
    const hurry = writer.hurry.bind(writer);
    writer.settled = () => (forced++, settled());
    writer.hurry = () => (forced++, hurry());
    const undisturbed: string[] = [];
    for (let i = 0; i < 5; i++) {
      const before = forced;
      const { id } = await f.openai().chat.completions.create(CHAT);
      if (forced === before) undisturbed.push(id);
    }
    await settled();
    // And handed over at once (under load the node's slot may not be granted back yet: the work
    // then waits in the store, and its opening commits before dispatch, by design).
    const { rows } = await f.server.ctx.db.query<{ job_id: string }>(
      'SELECT job_id FROM work_items WHERE job_id = ANY($1::text[]) AND dispatched_at = created_at',
      [undisturbed],
    );
    const handed = rows.map((r) => r.job_id);
    expect(handed.length).toBeGreaterThanOrEqual(2);
    for (const id of handed) {
      const { opening, receipt } = transactionsOf(transactions, id);
      expect(opening).toBeTypeOf('number');
      expect(receipt).toBe(opening);
    }
  }, 90_000);

  it("the receipt applied in its opening's transaction reads nothing back that the opening just wrote, and each record is written once, whole", async () => {
    f = await startGatewayFixture({ env: { SVC_WRITER_OPENING_WAIT_MS: '60000' } });
    const polls = watchPolls(f.server.ctx);
    await f.addNode({ channel: true });
    await polls.until(1);
    const transactions = recordTransactions(f.server.ctx.db);
    const done = await f.openai().chat.completions.create(CHAT);
    await f.server.ctx.writer.settled();
    const flush = transactions.find((t) => t.some((sql) => sql.startsWith('INSERT INTO receipts')));
    expect(flush?.some((sql) => sql.startsWith('INSERT INTO gateway_requests'))).toBe(true);
    // Not locked and read again: the work, the request, the evidence run's head.
    expect(
      flush?.filter((sql) =>
        /FROM work_items w WHERE w.job_id|FROM gateway_requests WHERE id = \$1 FOR UPDATE|FROM evidence_runs r WHERE r.job_id/.test(
          sql,
        ),
      ),
    ).toEqual([]);
    // Nor written twice: the request, its work and its run are inserted completed; and no hold is
    // written at all (DESIGN.md section 7, revised 2026-11-27).
    expect(
      flush?.filter((sql) => /^UPDATE (work_items|gateway_requests|evidence_runs)|credit_holds/.test(sql)),
    ).toEqual([]);
    expect(
      flush?.filter((sql) => /INSERT INTO (gateway_requests|work_items|evidence_runs|receipts)/.test(sql)),
    ).toHaveLength(4);
    // And everything is there as on any other path: one receipt, the charge and earning, the run signed.
    const request = await f.api('GET', `/api/v1/gateway/requests/${done.id}`);
    expect(request.json).toMatchObject({ status: 'completed' });
    expect(request.json.receipt_id).toMatch(/^rcpt_/);
    const ledger = await f.server.ctx.db.query<{ tx_type: string }>(
      'SELECT tx_type FROM credit_transactions WHERE ref = $1 ORDER BY tx_type',
      [done.id],
    );
    expect(ledger.rows.map((r) => r.tx_type)).toEqual(['charge', 'earning']);
    const receipts = (await f.api('GET', `/api/v1/job/receipts/${done.id}`)).json.receipts as unknown[];
    expect(receipts).toHaveLength(1);
    const keys = (await f.api('GET', '/api/v1/keys/platform')).json.keys as { public_key_hex: string }[];
    const bundle = (await f.api('GET', `/api/v1/jobs/${done.id}/evidence/bundle`)).text;
    const verified = await verifyBundle(bundle, { trustedKeys: keys });
    expect(verified.checks.filter((c) => !c.ok)).toEqual([]);
    const graph = (await f.api('GET', `/api/v1/jobs/${done.id}/evidence`)).json as {
      events: { event_type: string }[];
      certificate: { signed: boolean; verified: boolean };
    };
    expect(graph.events.map((e) => e.event_type)).toEqual(COMPLETED_REQUEST_EVENTS);
    expect(graph.certificate).toMatchObject({ signed: true, verified: true });
  }, 90_000);

  it('with no wait configured, the opening commits in a flush of its own, before the completion', async () => {
    f = await startGatewayFixture({ env: { SVC_WRITER_OPENING_WAIT_MS: '0', SVC_WRITER_FLUSH_MS: '0' } });
    const polls = watchPolls(f.server.ctx);
    await f.addNode({ channel: true });
    await polls.until(1);
    const transactions = recordTransactions(f.server.ctx.db);
    const { id } = await f.openai().chat.completions.create(CHAT);
    await f.server.ctx.writer.settled();
    const { opening, receipt } = transactionsOf(transactions, id);
    expect(opening).toBeTypeOf('number');
    expect(receipt).toBeTypeOf('number');
    expect(receipt).not.toBe(opening);
  }, 90_000);

  it('a streaming client leaving before the completion hurries the opening: the request ends at once, not after the wait', async () => {
    f = await startGatewayFixture({ env: { SVC_WRITER_OPENING_WAIT_MS: '60000' } });
    const db = f.server.ctx.db;
    const polls = watchPolls(f.server.ctx);
    // The engine takes 20 s: the request is still running when its client leaves.
    await f.addNode({ channel: true, upstream: { delayMs: 20_000 } });
    await polls.until(1);
    const leave = new AbortController();
    const asked = fetch(`${f.server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${f.buyer.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ ...CHAT, stream: true }),
      signal: leave.signal,
    }).catch(() => undefined);
    // Handed over, its opening waiting in the writer.
    await eventually(() => f?.server.ctx.writer.pending === 1);
    expect((await db.query('SELECT id FROM gateway_requests')).rows).toEqual([]);
    const left = Date.now();
    leave.abort();
    await asked;
    // Ending it needs the request in the store: the opening is flushed at once, then it is ended.
    const ended = await eventually(async () => {
      const { rows } = await db.query<{ status: string }>('SELECT status FROM gateway_requests');
      return rows.length === 0 || rows[0]?.status === 'running' ? undefined : rows;
    });
    expect(ended).toEqual([{ status: 'cancelled' }]);
    expect(Date.now() - left).toBeLessThan(10_000);
  }, 90_000);
});

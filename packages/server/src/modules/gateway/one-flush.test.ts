import { afterEach, describe, expect, it } from 'vitest';
import { eventually, startGatewayFixture, type GatewayFixture } from '../../../test/gateway-fixture.js';
import { watchPolls } from '../../../test/waits.js';
import type { Queryable } from '../../platform/db/index.js';

const CHAT = { model: 'tinyllama', messages: [{ role: 'user' as const, content: 'one transaction' }] };

/**
 * The transaction that inserted a request's opening records (its first evidence event, never
 * updated afterwards) and the one that inserted its receipt: rows inserted by one transaction
 * share its `xmin`.
 */
async function transactionsOf(db: Queryable, id: string) {
  const opened = await db.query<{ x: string }>(
    "SELECT e.xmin::text AS x FROM evidence_events e JOIN evidence_runs r ON r.id = e.run_id WHERE r.job_id = $1 AND e.event_type = 'request.received'",
    [id],
  );
  const receipt = await db.query<{ x: string }>('SELECT xmin::text AS x FROM receipts WHERE job_id = $1', [id]);
  return { opening: opened.rows[0]?.x, receipt: receipt.rows[0]?.x };
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
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await f.openai().chat.completions.create(CHAT)).id);
    await f.server.ctx.writer.settled();
    for (const id of ids) {
      const { opening, receipt } = await transactionsOf(f.server.ctx.db, id);
      expect(opening).toMatch(/^\d+$/);
      expect(receipt).toBe(opening);
    }
  }, 90_000);

  it('with no wait configured, the opening commits in a flush of its own, before the completion', async () => {
    f = await startGatewayFixture({ env: { SVC_WRITER_OPENING_WAIT_MS: '0', SVC_WRITER_FLUSH_MS: '0' } });
    const polls = watchPolls(f.server.ctx);
    await f.addNode({ channel: true });
    await polls.until(1);
    const { id } = await f.openai().chat.completions.create(CHAT);
    await f.server.ctx.writer.settled();
    const { opening, receipt } = await transactionsOf(f.server.ctx.db, id);
    expect(opening).toMatch(/^\d+$/);
    expect(receipt).toMatch(/^\d+$/);
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

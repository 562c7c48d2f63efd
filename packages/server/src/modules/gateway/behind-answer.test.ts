import { afterEach, describe, expect, it } from 'vitest';
import { eventually, startGatewayFixture, type GatewayFixture } from '../../../test/gateway-fixture.js';
import { watchPolls } from '../../../test/waits.js';
import { endRequest } from './settle.js';
import { submitReceipt } from '../work/intake.js';
import { findNode } from '../nodes/store.js';
import { createRunningAttempts } from './attempts.js';
import type { GatewayRequestRow } from './store.js';
import { createTestStore } from '../../../test/harness.js';
import { openDb, type Queryable } from '../../platform/db/index.js';

const CHAT = { model: 'tinyllama', messages: [{ role: 'user' as const, content: 'answer before the commit' }] };

/** What the store holds for a request, read directly (not through the instance, so not waiting for the writer). */
async function stored(db: Queryable, id: string) {
  const request = await db.query<{ status: string; receipt_id: string | null }>(
    'SELECT status, receipt_id FROM gateway_requests WHERE id = $1',
    [id],
  );
  const receipts = await db.query<{ id: string }>('SELECT id FROM receipts WHERE job_id = $1', [id]);
  const charges = await db.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM credit_transactions WHERE ref = $1 AND tx_type = 'charge'",
    [id],
  );
  return { status: request.rows[0]?.status, receipts: receipts.rows.map((r) => r.id), charges: charges.rows[0]?.n };
}

/**
 * DESIGN.md section 4 (revised 2026-11-24): a gateway receipt of a request this instance waits for
 * is checked in memory, the client is answered at once, and the records follow in the
 * group-commit writer; the node is acknowledged only after they committed.
 */
describe('gateway records written behind the answer', () => {
  let f: GatewayFixture | undefined;
  afterEach(async () => {
    await f?.close();
    f = undefined;
  });

  for (const channel of [true, false]) {
    it(`${channel ? 'channel' : 'HTTP'} receipt: answered before its records commit, acknowledged after; a read through the instance sees them`, async () => {
      // A flush interval no test outlasts: the records commit only when a read asks for them.
      f = await startGatewayFixture({ env: { SVC_WRITER_FLUSH_MS: '60000' } });
      const polls = watchPolls(f.server.ctx);
      const node = await f.addNode({ channel });
      // The node's poll waits here: the work is handed to it before its opening is written.
      await polls.until(1);
      const answer = await f.openai().chat.completions.create(CHAT);
      const receiptId = (answer as unknown as { svc_receipt_id: string }).svc_receipt_id;
      expect(receiptId).toMatch(/^rcpt_/);
      // Answered while the store has nothing of the request yet: its opening and its completion
      // both wait in the writer.
      expect(await stored(f.server.ctx.db, answer.id)).toEqual({ status: undefined, receipts: [], charges: 0 });
      expect(f.server.ctx.writer.pending).toBe(2);
      // The node is not acknowledged yet: its receipt stays in its outbox.
      expect(node.workEvents().filter((e) => e.outcome === 'completed')).toEqual([]);

      // Read-your-writes: the read waits for the pending flush and sees the receipt it was answered with.
      const receipts = await f.api('GET', `/api/v1/job/receipts/${answer.id}`);
      expect(receipts.status).toBe(200);
      expect((receipts.json.receipts as { id: string }[]).map((r) => r.id)).toEqual([receiptId]);
      const request = await f.api('GET', `/api/v1/gateway/requests/${answer.id}`);
      expect({ status: request.json.status, receipt_id: request.json.receipt_id }).toEqual({
        status: 'completed',
        receipt_id: receiptId,
      });
      expect(await stored(f.server.ctx.db, answer.id)).toEqual({
        status: 'completed',
        receipts: [receiptId],
        charges: 1,
      });
      // Now committed, the node hears its acknowledgement and empties its outbox.
      await eventually(() => expect(node.workEvents().map((e) => e.outcome)).toEqual(['completed']));
    }, 90_000);
  }

  it('a client timeout racing the in-memory completion does not end the request twice', async () => {
    f = await startGatewayFixture({ env: { SVC_WRITER_FLUSH_MS: '60000' } });
    await f.addNode();
    const answer = await f.openai().chat.completions.create(CHAT);
    // The request ended (completed behind the answer): a late timeout or disconnect ends nothing.
    const charged = await endRequest(f.server.ctx, answer.id, { status: 'timeout', error: 'late', cancelWork: true });
    expect(charged).toBeUndefined();
    await f.server.ctx.writer.settled();
    const after = await stored(f.server.ctx.db, answer.id);
    expect(after.status).toBe('completed');
    expect(after.charges).toBe(1);
  }, 90_000);

  it('a receipt sent again while its first send is still being written waits for it, then is a duplicate (409), applied once', async () => {
    f = await startGatewayFixture({ env: { SVC_WRITER_FLUSH_MS: '60000' } });
    const polls = watchPolls(f.server.ctx);
    const node = await f.addNode();
    await polls.until(1);
    // The receipt message as it reaches the server over the node's channel.
    let sent: { receipt: Parameters<typeof submitReceipt>[2] } | undefined;
    for (const socket of f.server.app.websocketServer.clients)
      socket.on('message', (data: Buffer) => {
        const m = JSON.parse(data.toString('utf8')) as { type: string; receipt: Parameters<typeof submitReceipt>[2] };
        if (m.type === 'receipt') sent = m;
      });
    const answer = await f.openai().chat.completions.create(CHAT);
    // The opening and the completion, both queued.
    expect(f.server.ctx.writer.pending).toBe(2);
    if (!sent) throw new Error('no receipt message seen');
    const row = await findNode(f.server.ctx.db, node.nodeId);
    if (!row) throw new Error('no node');
    // Sent again (as over HTTP) while the first is still queued: it waits for that write, then meets it.
    let over = false;
    const again = submitReceipt(f.server.ctx, row, sent.receipt).finally(() => (over = true));
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(over).toBe(false);
    await f.server.ctx.writer.settled();
    await expect(again).rejects.toMatchObject({ code: 'conflict' });
    expect(await stored(f.server.ctx.db, answer.id)).toMatchObject({ status: 'completed', charges: 1 });
    expect((await stored(f.server.ctx.db, answer.id)).receipts).toHaveLength(1);
  }, 90_000);

  it('shutdown drains the writer: records queued behind an answer are committed, not lost', async () => {
    const store = await createTestStore();
    try {
      f = await startGatewayFixture({ env: { SVC_WRITER_FLUSH_MS: '60000' }, store });
      const polls = watchPolls(f.server.ctx);
      await f.addNode();
      await polls.until(1);
      const answer = await f.openai().chat.completions.create(CHAT);
      // The opening and the completion, both queued.
      expect(f.server.ctx.writer.pending).toBe(2);
      const receiptId = (answer as unknown as { svc_receipt_id: string }).svc_receipt_id;
      await f.close();
      f = undefined;
      const db = await openDb(store);
      try {
        expect(await stored(db, answer.id)).toEqual({ status: 'completed', receipts: [receiptId], charges: 1 });
      } finally {
        await db.close();
      }
    } finally {
      await store.drop();
    }
  }, 90_000);
});

describe('running attempts (the in-memory claim)', () => {
  const row = (id: string, nodeId: string, workId: string) =>
    ({ id, node_id: nodeId, work_id: workId }) as GatewayRequestRow;

  it('a receipt and an ending race for one request: whichever claims first wins, once', () => {
    const attempts = createRunningAttempts();
    attempts.open(row('r1', 'n1', 'w1'));
    expect(attempts.claim('r1', 'n2')).toBeUndefined(); // not the node the work is leased to
    expect(attempts.claim('r1', 'n1')?.state).toBe('completing');
    expect(attempts.claim('r1', 'n1')).toBeUndefined(); // at most once
    expect(attempts.end('r1')).toBe(false); // completing: the ending must not run

    attempts.open(row('r2', 'n1', 'w2'));
    expect(attempts.end('r2')).toBe(true);
    expect(attempts.claim('r2', 'n1')).toBeUndefined(); // ended: the store's path decides
  });

  it('a failover moves the request: the old node can no longer claim it; a settled write forgets it', async () => {
    const attempts = createRunningAttempts();
    attempts.open(row('r1', 'n1', 'w1'));
    attempts.moved('r1', 'w2', 'n2');
    expect(attempts.claim('r1', 'n1')).toBeUndefined();
    expect(attempts.claim('r1', 'n2')?.row.work_id).toBe('w2');
    let commit: () => void = () => undefined;
    const written = new Promise<void>((resolve) => (commit = resolve));
    attempts.writing('r1', written);
    expect(attempts.pendingWrite('r1')).toBe(written);
    commit();
    await written;
    await Promise.resolve();
    expect(attempts.size).toBe(0);
  });
});

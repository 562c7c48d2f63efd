import { afterEach, describe, expect, it, vi } from 'vitest';
import type OpenAI from 'openai';
import { eventually, startGatewayFixture, type GatewayFixture } from '../../../test/gateway-fixture.js';
import { onTransactionStatements } from '../../../test/transaction-spy.js';
import { watchPolls } from '../../../test/waits.js';
import { prepareChat } from './chat.js';
import { holdCents } from './pricing.js';
import { reconcileAccount } from '../billing/service.js';

const chats = (r: { path: string }) => r.path.endsWith('/chat/completions');
const CHAT = { model: 'tinyllama', messages: [{ role: 'user' as const, content: 'hello there' }], max_tokens: 2_000 };

describe('opening a gateway request through svc', () => {
  let f: GatewayFixture | undefined;
  afterEach(async () => {
    vi.restoreAllMocks();
    await f?.close();
    f = undefined;
  });

  /** The work ids handed to a node's waiting poll or channel in memory (the path that needs no stored row). */
  function recordHandovers(fixture: GatewayFixture, onHandover?: () => void): string[] {
    const { jobSignal } = fixture.server.ctx;
    const handed: string[] = [];
    const reserve = jobSignal.reserve.bind(jobSignal);
    vi.spyOn(jobSignal, 'reserve').mockImplementation((nodeId) => {
      const handoff = reserve(nodeId);
      if (!handoff) return undefined;
      return {
        deliver: (work) => {
          handed.push(...work.map((w) => w.id));
          onHandover?.();
          return handoff.deliver(work);
        },
        release: () => handoff.release(),
      };
    });
    return handed;
  }

  /** The order of the hand-over to the node's waiting poll and the opening transaction's write of the request. */
  function recordOrder(fixture: GatewayFixture): string[] {
    const order: string[] = [];
    recordHandovers(fixture, () => order.push('handed to the poll'));
    onTransactionStatements(fixture.server.ctx.db, (sql) => {
      if (sql.includes('INSERT INTO gateway_requests')) order.push('request written');
    });
    return order;
  }

  it("one dispatch path on every store: the node's waiting poll gets the work before the writer commits the opening", async () => {
    f = await startGatewayFixture();
    const polls = watchPolls(f.server.ctx);
    await f.addNode();
    const ask = () => f?.openai().chat.completions.create(CHAT);
    await ask();
    // The node's re-poll waits again, and the first request's records (written behind its answer) are in.
    await polls.until(1);
    await f.server.ctx.writer.settled();
    const order = recordOrder(f);
    const answer = await ask();
    expect(answer?.choices[0]?.message.content).toBeTruthy();
    // The work row is stored as dispatched, and the request was charged (by the writer's flush
    // behind the answer: this reads the store directly, not through the instance).
    await f.server.ctx.writer.settled();
    expect(order).toEqual(['handed to the poll', 'request written']);
    const { rows } = await f.server.ctx.db.query<{ dispatched: boolean; charged_cents: number }>(
      'SELECT w.dispatched_at IS NOT NULL AS dispatched, g.charged_cents FROM work_items w JOIN gateway_requests g ON g.work_id = w.id WHERE g.id = $1',
      [answer?.id],
    );
    expect(rows).toEqual([{ dispatched: true, charged_cents: expect.any(Number) }]);
  }, 90_000);

  it('two requests at once on credits that cover one: one is answered, the other is refused 402 before any node sees it', async () => {
    const cents = holdCents(prepareChat(CHAT).maxMicro);
    expect(cents).toBeGreaterThan(0);
    // Enough for one hold, not for two.
    f = await startGatewayFixture({ env: { SVC_FREE_TIER_CENTS: String(2 * cents - 1) } });
    const polls = watchPolls(f.server.ctx);
    // The answered request is still in flight when the other is decided: a take about to be
    // refused first waits for records of answered requests (the next test), and this one's
    // receipt must not be among them.
    const ca = await f.addNode({ country: 'CA', upstream: { delayMs: 1_500 } });
    const us = await f.addNode({ country: 'US', upstream: { delayMs: 1_500 } });
    // Both nodes' polls wait, so each request could be handed over at once.
    await polls.until(2);
    const handed = recordHandovers(f);
    // Neither request reads the balance: the reservation in memory decides. Both arrive at it
    // before either goes on, so neither can finish (and give back its hold) before the other is decided.
    const balance = vi.spyOn(f.server.ctx.ledger, 'balance');
    const { reservations } = f.server.ctx;
    const take = reservations.take.bind(reservations);
    let arrived = 0;
    let bothArrived: () => void = () => undefined;
    const barrier = new Promise<void>((resolve) => (bothArrived = resolve));
    vi.spyOn(reservations, 'take').mockImplementation(async (orgId, need) => {
      if (++arrived === 2) bothArrived();
      await barrier;
      return take(orgId, need);
    });
    const client = f.openai();
    const results = await Promise.allSettled([
      client.chat.completions.create({
        ...CHAT,
        strict_jurisdiction: 'CA',
      } as OpenAI.ChatCompletionCreateParamsNonStreaming),
      client.chat.completions.create({
        ...CHAT,
        strict_jurisdiction: 'US',
      } as OpenAI.ChatCompletionCreateParamsNonStreaming),
    ]);
    const refused = results
      .filter((r) => r.status === 'rejected')
      .map((r) => (r as PromiseRejectedResult).reason as unknown);
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
    expect(refused).toHaveLength(1);
    expect(refused[0]).toMatchObject({ status: 402, code: 'insufficient_credits' });
    // Work reaches a node handed over in memory or as a stored row: one of each, for the answered request only.
    // Read the store directly once the records written behind the answer are committed.
    await f.server.ctx.writer.settled();
    const { rows } = await f.server.ctx.db.query<{ id: string }>('SELECT id FROM work_items');
    expect(rows).toHaveLength(1);
    expect(handed).toEqual([rows[0]?.id]);
    expect([...(ca.upstream?.requests ?? []), ...(us.upstream?.requests ?? [])].filter(chats)).toHaveLength(1);
    expect(balance).not.toHaveBeenCalled();
    const audit = await reconcileAccount(f.server.ctx.db, f.buyer.orgId);
    expect([audit.held_cents, audit.consistent]).toEqual([0, true]);
  }, 90_000);

  it("back to back on credits that cover one hold: the next request waits for the first's records behind its answer instead of a 402", async () => {
    const cents = holdCents(prepareChat(CHAT).maxMicro);
    // Enough for one hold, and for two requests once the first is charged what it cost (a few
    // tokens, far below its hold). Its records wait a long flush interval behind its answer.
    f = await startGatewayFixture({ env: { SVC_FREE_TIER_CENTS: String(2 * cents - 1), SVC_WRITER_FLUSH_MS: '2000' } });
    await f.addNode();
    const client = f.openai();
    const first = await client.chat.completions.create(CHAT);
    // Its hold is still whole: the receipt that charges it is queued, not committed.
    expect(f.server.ctx.writer.pending).toBeGreaterThan(0);
    const started = performance.now();
    const second = await client.chat.completions.create(CHAT);
    expect(second.id).not.toBe(first.id);
    // It waited for a flush brought forward, not for the flush interval.
    expect(performance.now() - started).toBeLessThan(1_500);
    await f.server.ctx.writer.settled();
    const audit = await reconcileAccount(f.server.ctx.db, f.buyer.orgId);
    expect([audit.held_cents, audit.consistent]).toEqual([0, true]);
  }, 90_000);

  it('a request whose credit the store no longer has (the reservation in memory believed in credits that are gone): answered, and its charge cut to what is there, never below zero', async () => {
    f = await startGatewayFixture({ env: { SVC_FREE_TIER_CENTS: '0' } });
    const polls = watchPolls(f.server.ctx);
    const node = await f.addNode();
    await polls.until(1);
    const handed = recordHandovers(f);
    // The reservation in memory says there is money; the hold in the store finds none.
    vi.spyOn(f.server.ctx.reservations, 'take').mockImplementation(async (_orgId, cents) => ({
      cents,
      release: () => undefined,
    }));

    const answer = await f.openai().chat.completions.create(CHAT);
    expect(answer.choices[0]?.message.content).toBeTruthy();
    await f.server.ctx.writer.settled();
    await eventually(() => node.workEvents().some((e) => e.outcome === 'completed'));
    expect(node.workEvents().map((e) => e.outcome)).toEqual(['completed']);
    // Handed over before the opening was written. No hold (DESIGN.md section 7): the charge finds
    // neither a reservation nor a balance, so no whole cent moves (its sub-cent usage is carried).
    expect(handed).toHaveLength(1);
    const { rows } = await f.server.ctx.db.query<{
      status: string;
      hold_id: string | null;
      charged_cents: number;
      receipts: number;
      holds: number;
      run: string;
    }>(
      `SELECT g.status, g.hold_id, g.charged_cents, (SELECT count(*)::int FROM receipts r WHERE r.job_id = g.id) AS receipts,
              (SELECT count(*)::int FROM credit_holds) AS holds,
              (SELECT status FROM evidence_runs e WHERE e.job_id = g.id) AS run
         FROM gateway_requests g WHERE g.id = $1`,
      [answer.id],
    );
    expect(rows).toEqual([
      { status: 'completed', hold_id: null, charged_cents: 0, receipts: 1, holds: 0, run: 'signed' },
    ]);
    const audit = await reconcileAccount(f.server.ctx.db, f.buyer.orgId);
    expect([audit.balance_cents, audit.held_cents, audit.consistent]).toEqual([0, 0, true]);
  }, 90_000);
});

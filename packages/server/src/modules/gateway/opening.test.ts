import { afterEach, describe, expect, it, vi } from 'vitest';
import type OpenAI from 'openai';
import { eventually, startGatewayFixture, type GatewayFixture } from '../../../test/gateway-fixture.js';
import { onTransactionStatements } from '../../../test/transaction-spy.js';
import { watchPolls } from '../../../test/waits.js';
import { prepareChat } from './chat.js';
import { createOpeningHolds } from './opening.js';
import { holdCents } from './pricing.js';

const chats = (r: { path: string }) => r.path.endsWith('/chat/completions');
const CHAT = { model: 'tinyllama', messages: [{ role: 'user' as const, content: 'hello there' }], max_tokens: 2_000 };

describe('the cents requests are about to hold', () => {
  it('adds up per organization and is taken off once, however often its release is called', () => {
    const opening = createOpeningHolds();
    const first = opening.add('org_a', 5);
    const second = opening.add('org_a', 3);
    opening.add('org_b', 7);
    expect([opening.of('org_a'), opening.of('org_b'), opening.of('org_c')]).toEqual([8, 7, 0]);
    first();
    first();
    expect(opening.of('org_a')).toBe(3);
    second();
    expect(opening.of('org_a')).toBe(0);
  });
});

describe('opening a gateway request through svc', () => {
  let f: GatewayFixture | undefined;
  afterEach(async () => {
    vi.restoreAllMocks();
    await f?.close();
    f = undefined;
  });

  /** The order of the hand-over to the node's waiting poll and the opening transaction's write of the request. */
  function recordOrder(fixture: GatewayFixture): string[] {
    const { ctx } = fixture.server;
    const order: string[] = [];
    const reserve = ctx.jobSignal.reserve.bind(ctx.jobSignal);
    vi.spyOn(ctx.jobSignal, 'reserve').mockImplementation((nodeId) => {
      const handoff = reserve(nodeId);
      if (!handoff) return undefined;
      return {
        deliver: (work) => {
          order.push('handed to the poll');
          return handoff.deliver(work);
        },
        release: () => handoff.release(),
      };
    });
    onTransactionStatements(ctx.db, (sql) => {
      if (sql.includes('INSERT INTO gateway_requests')) order.push('request written');
    });
    return order;
  }

  it("on the embedded store the node's waiting poll gets the work before the opening transaction runs; on PostgreSQL after it commits", async () => {
    f = await startGatewayFixture();
    const polls = watchPolls(f.server.ctx);
    await f.addNode();
    const ask = () => f?.openai().chat.completions.create(CHAT);
    await ask();
    // The node's re-poll waits again.
    await polls.until(1);
    const order = recordOrder(f);
    const answer = await ask();
    expect(answer?.choices[0]?.message.content).toBeTruthy();
    expect(order).toEqual(
      f.server.ctx.db.kind === 'pglite'
        ? ['handed to the poll', 'request written']
        : ['request written', 'handed to the poll'],
    );
    // The work row is stored as dispatched, and the request was charged.
    const { rows } = await f.server.ctx.db.query<{ dispatched: boolean; charged_cents: number }>(
      'SELECT w.dispatched_at IS NOT NULL AS dispatched, g.charged_cents FROM work_items w JOIN gateway_requests g ON g.work_id = w.id WHERE g.id = $1',
      [answer?.id],
    );
    expect(rows).toEqual([{ dispatched: true, charged_cents: expect.any(Number) }]);
  });

  it('two requests at once on credits that cover one: one is answered, the other is refused 402 before any node sees it', async () => {
    const cents = holdCents(prepareChat(CHAT).maxMicro);
    expect(cents).toBeGreaterThan(0);
    // Enough for one hold, not for two.
    f = await startGatewayFixture({ env: { SVC_FREE_TIER_CENTS: String(2 * cents - 1) } });
    const polls = watchPolls(f.server.ctx);
    const ca = await f.addNode({ country: 'CA' });
    const us = await f.addNode({ country: 'US' });
    // Both nodes' polls wait, so each request could be handed over at once.
    await polls.until(2);
    // Both balance reads happen before either request goes on: each sees the whole balance.
    const { ledger } = f.server.ctx;
    const read = ledger.balance.bind(ledger);
    let arrived = 0;
    let bothRead: () => void = () => undefined;
    const barrier = new Promise<void>((resolve) => (bothRead = resolve));
    vi.spyOn(ledger, 'balance').mockImplementation(async (orgId) => {
      const balance = await read(orgId);
      if (++arrived === 2) bothRead();
      await barrier;
      return balance;
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
    // Give a work item handed over in vain the time to reach its upstream: none may.
    await new Promise((r) => setTimeout(r, 300));
    expect([...(ca.upstream?.requests ?? []), ...(us.upstream?.requests ?? [])].filter(chats)).toHaveLength(1);
    const { rows } = await f.server.ctx.db.query<{ n: number }>('SELECT count(*)::int AS n FROM work_items');
    expect(rows[0]?.n).toBe(1);
    expect(f.server.ctx.openingHolds.of(f.buyer.orgId)).toBe(0);
  });

  it('an opening that fails after the hand-over answers its error, charges nothing, and the node is told to stop the work', async () => {
    f = await startGatewayFixture({ env: { SVC_FREE_TIER_CENTS: '0' } });
    // An upstream slow enough for the node's heartbeat to come while it runs.
    const polls = watchPolls(f.server.ctx);
    const node = await f.addNode({ upstream: { delayMs: 3_000 } });
    await polls.until(1);
    // The balance check passes on a read that says there is money; the hold in the store finds none.
    vi.spyOn(f.server.ctx.ledger, 'balance').mockResolvedValue({
      balance_cents: 1_000_000,
      held_cents: 0,
      available_cents: 1_000_000,
    } as never);
    const failed = await f
      .openai()
      .chat.completions.create(CHAT)
      .catch((e: unknown) => e);
    expect(failed).toMatchObject({ status: 402, code: 'insufficient_credits' });
    const counts = await f.server.ctx.db.query<{ requests: number; holds: number; work: number }>(
      'SELECT (SELECT count(*)::int FROM gateway_requests) AS requests, (SELECT count(*)::int FROM credit_holds) AS holds, (SELECT count(*)::int FROM work_items) AS work',
    );
    expect(counts.rows).toEqual([{ requests: 0, holds: 0, work: 0 }]);
    if (f.server.ctx.db.kind === 'pglite') {
      // The node had the work; its heartbeat hears the store does not, and it stops.
      await eventually(() => node.workEvents().some((e) => e.outcome === 'cancelled'), 5_000).catch(() => undefined);
      expect(node.workEvents().map((e) => e.outcome)).toEqual(['cancelled']);
    } else {
      expect((node.upstream?.requests ?? []).filter(chats)).toEqual([]);
    }
  });
});

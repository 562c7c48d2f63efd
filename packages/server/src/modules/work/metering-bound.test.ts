import { sha256Hex, signSvc1, type ServerChannelMessage } from '@svc/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  bearer,
  createKey,
  createTestApp,
  createTestNode,
  eventually,
  signUp,
  type TestApp,
  type TestBuyer,
  type TestNode,
  type WorkItem,
} from '../../../test/harness.js';
import { findNode } from '../nodes/store.js';
import { openChannel, type ChannelConnection } from './channel.js';

/**
 * Issue 40 point 6: a node cannot charge beyond the request's own bound. The probe: a signed
 * receipt with metering_units 2e9 for a chat with max_tokens 16 was charged the whole hold
 * (about 500 times the request's maximum). Now it is refused (400 naming /metering_units),
 * nothing is charged, the work fails over or fails, and the node's reputation drops.
 */

const PROBE_UNITS = 2_000_000_000;
const ANSWER = { content: 'hi', finish_reason: 'stop', usage: { prompt_tokens: 3, completion_tokens: 1 } };
const OUTPUT = JSON.stringify(ANSWER);

/** The receipt body with its result inline, as the agent sends gateway work, for `units`. */
function inlineReceipt(node: TestNode, work: WorkItem, units: number) {
  const result_hash = sha256Hex(OUTPUT);
  return {
    job_id: work.job_id,
    pubkey: node.pubkey,
    result_hash,
    metering_units: units,
    signature: signSvc1(
      { job_id: work.job_id, node_public_key_hex: node.pubkey, result_hash_hex: result_hash, metering_units: units },
      node.privateKey,
    ),
    metadata: { model: work.model, engine: 'test' },
    result: {
      output: OUTPUT,
      encoding: 'utf8',
      content_type: 'application/json',
      result_hash,
      metering_units: units,
      usage: ANSWER.usage,
    },
    ...(work.ticket ? { ticket: work.ticket } : {}),
  };
}

describe('a receipt over its work’s metering bound', () => {
  let t: TestApp;
  let buyer: TestBuyer;
  let operatorKey: string;
  let seq = 0;
  const channels: ChannelConnection[] = [];

  beforeAll(async () => {
    t = await createTestApp();
    buyer = await signUp(t.app);
    operatorKey = await createKey(t.app, await signUp(t.app), ['operator']);
  });
  afterAll(async () => {
    for (const c of channels) c.close();
    await t.close();
  });

  const balance = async () =>
    (await t.app.inject({ method: 'GET', url: '/api/v1/billing/balance', headers: bearer(buyer.apiKey) })).json() as {
      balance_cents: number;
      held_cents: number;
    };
  /** The node's reputation as its operator's NodeSummary shows it. */
  const reputation = async (node: TestNode) => {
    const res = await t.app.inject({ method: 'GET', url: '/api/v1/nodes', headers: bearer(operatorKey) });
    const summary = (res.json() as { nodes: { node_id: string; reputation: number }[] }).nodes.find(
      (n) => n.node_id === node.nodeId,
    );
    return summary?.reputation;
  };
  const charges = async (ref: string) =>
    (
      await t.ctx.db.query<{ n: number; micro: string | null }>(
        `SELECT count(*)::int AS n, sum(amount_micro)::text AS micro FROM credit_transactions WHERE ref = $1 AND tx_type = 'charge'`,
        [ref],
      )
    ).rows[0];
  const chat = (model: string, stream = false) =>
    t.app.inject({
      method: 'POST',
      url: '/v1/chat/completions',
      headers: bearer(buyer.apiKey),
      payload: { model, messages: [{ role: 'user', content: 'say hi' }], max_tokens: 16, stream },
    });

  /** A node serving only `model` with its channel open (a fake socket: what the server sends is recorded). */
  async function channelNode(model: string) {
    const node = await createTestNode(t.app, operatorKey, { models: [model], max_concurrency: 4 });
    const row = await findNode(t.ctx.db, node.nodeId);
    if (!row) throw new Error('node not stored');
    const sent: ServerChannelMessage[] = [];
    const socket = {
      readyState: 1,
      send(data: string, done?: (err?: Error) => void) {
        sent.push(JSON.parse(data) as ServerChannelMessage);
        queueMicrotask(() => done?.());
      },
      close() {
        socket.readyState = 3;
      },
    };
    const conn = openChannel(t.ctx, row, socket);
    channels.push(conn);
    const say = (message: Record<string, unknown>) => {
      const m = { ...message, seq: ++seq };
      conn.receive(JSON.stringify(m));
      return m.seq;
    };
    const work = () => sent.flatMap((m) => (m.type === 'work' ? m.work : []));
    const replyTo = (re: number) => sent.find((m) => (m.type === 'reply' || m.type === 'ack') && m.re === re);
    return { node, say, work, replyTo };
  }

  it('HTTP, fast path: the probe is refused, the request fails over to another node, only the honest receipt is charged', async () => {
    const model = 'svc-llama-3.2-3b';
    const a = await createTestNode(t.app, operatorKey, { models: [model] });
    const b = await createTestNode(t.app, operatorKey, { models: [model] });
    const before = await balance();
    const answer = chat(model);
    // Whichever node the request reaches first lies; the other is where it fails over to.
    const first = await eventually(async () => {
      for (const node of [a, b]) {
        const [work] = await node.poll();
        if (work) return { node, work };
      }
      return undefined;
    });
    const [liar, honest] = first.node === a ? [a, b] : [b, a];
    const refused = await liar.call('POST', '/api/v1/node/receipt', inlineReceipt(liar, first.work, PROBE_UNITS));
    expect(refused.statusCode).toBe(400);
    expect(refused.json()).toMatchObject({
      error: 'invalid_request',
      details: [{ path: '/metering_units', message: 'must be at most 294 for this work' }],
    });
    expect(await charges(first.work.job_id)).toEqual({ n: 0, micro: null });

    const retried = await eventually(async () => (await honest.poll())[0]);
    expect(retried.job_id).toBe(first.work.job_id);
    const ok = await honest.call('POST', '/api/v1/node/receipt', inlineReceipt(honest, retried, 4));
    expect(ok.statusCode).toBe(200);
    const res = await answer;
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ usage: { prompt_tokens: 3, completion_tokens: 1 } });
    await t.ctx.writer.settled();
    // One charge, of the honest usage (a few micro-CAD), not the hold.
    const charged = await charges(first.work.job_id);
    expect(charged?.n).toBe(1);
    expect(Number(charged?.micro)).toBeLessThan(10);
    expect((await balance()).balance_cents).toBeGreaterThanOrEqual(before.balance_cents - 1);
    expect(await reputation(liar)).toBe(90);
    expect(await reputation(honest)).toBe(100);
    // Sent again (the agent's outbox after a restart): the attempt has failed, nothing more happens.
    const again = await liar.call('POST', '/api/v1/node/receipt', inlineReceipt(liar, first.work, PROBE_UNITS));
    expect(again.statusCode).toBe(409);
    expect(await reputation(liar)).toBe(90);
  }, 60_000);

  it('over the node channel: refused with a failed reply, the buyer gets 502 in the OpenAI envelope, the balance is unchanged', async () => {
    const c = await channelNode('phi-4');
    c.say({ type: 'grant', slots: 1 });
    const before = await balance();
    const answer = chat('phi-4');
    const work = await eventually(() => c.work()[0]);
    const re = c.say({ type: 'receipt', work_id: work.work_id, receipt: inlineReceipt(c.node, work, PROBE_UNITS) });
    const reply = await eventually(() => c.replyTo(re));
    expect(reply).toMatchObject({ type: 'reply', ok: false, error: { code: 400, error: 'invalid_request' } });
    const res = await answer;
    expect(res.statusCode).toBe(502);
    expect(res.json()).toMatchObject({
      error: { type: 'api_error', code: 'upstream_error', message: expect.stringContaining('receipt refused') },
    });
    expect(await charges(work.job_id)).toEqual({ n: 0, micro: null });
    expect(await balance()).toEqual(before);
    expect(await reputation(c.node)).toBe(90);
  }, 60_000);

  it('a streamed chat: the stream ends with an error chunk, nothing is billed, not even the node’s done counts', async () => {
    const c = await channelNode('tinyllama');
    c.say({ type: 'grant', slots: 1 });
    const before = await balance();
    const answer = chat('tinyllama', true);
    const work = await eventually(() => c.work()[0]);
    c.say({
      type: 'events',
      work_id: work.work_id,
      events: [
        { type: 'delta', content: 'hi' },
        { type: 'done', usage: { prompt_tokens: 3, completion_tokens: PROBE_UNITS }, finish_reason: 'stop' },
      ],
    });
    const re = c.say({ type: 'receipt', work_id: work.work_id, receipt: inlineReceipt(c.node, work, PROBE_UNITS) });
    expect(await eventually(() => c.replyTo(re))).toMatchObject({ ok: false, error: { code: 400 } });
    const res = await answer;
    expect(res.statusCode).toBe(200);
    const events = res.body
      .split('\n\n')
      .filter((l) => l.startsWith('data: {'))
      .map((l) => JSON.parse(l.slice(6)) as Record<string, unknown>);
    expect(events.at(-1)).toMatchObject({
      error: { code: 'upstream_error', message: expect.stringContaining('receipt refused') },
    });
    expect(res.body.trimEnd().endsWith('data: [DONE]')).toBe(true);
    await eventually(async () => {
      const { rows } = await t.ctx.db.query<{ status: string }>('SELECT status FROM gateway_requests WHERE id = $1', [
        work.job_id,
      ]);
      return rows[0]?.status === 'failed';
    });
    expect(await charges(work.job_id)).toEqual({ n: 0, micro: null });
    expect(await balance()).toEqual(before);
    expect(await reputation(c.node)).toBe(90);
  }, 60_000);

  it('a job: the attempt fails and the job goes back to the queue, its hold untouched, the node’s reputation lower', async () => {
    const node = await createTestNode(t.app, operatorKey, { models: ['tinyllama'], country: 'NO' });
    const submit = await t.app.inject({
      method: 'POST',
      url: '/api/v1/marketplace/jobs',
      headers: bearer(buyer.apiKey),
      payload: {
        kind: 1,
        budget: 0.5,
        max_price_per_unit: 0.00001,
        currency: 'CAD',
        model: 'tinyllama',
        inline_text: 'one prompt',
        strict_jurisdiction: 'NO',
      },
    });
    expect(submit.statusCode).toBe(201);
    const jobId = submit.json().job_id as string;
    const before = await balance();
    const [work] = await node.poll({ waitMs: 1000 });
    if (!work) throw new Error('no work');
    // Its bound: 'one prompt' (10 bytes + 16) and tinyllama's 2,048-token context + 256.
    const refused = await node.complete(work, JSON.stringify({ results: [] }), PROBE_UNITS);
    expect(refused.statusCode).toBe(400);
    expect(refused.json().details).toEqual([
      { path: '/metering_units', message: 'must be at most 2330 for this work' },
    ]);
    const job = (
      await t.app.inject({ method: 'GET', url: `/api/v1/marketplace/jobs/${jobId}`, headers: bearer(buyer.apiKey) })
    ).json();
    expect(job).toMatchObject({ status: 'pending', attempts: 1, charged_cents: null });
    expect(await charges(jobId)).toEqual({ n: 0, micro: null });
    expect(await balance()).toEqual(before);
    expect(await reputation(node)).toBe(90);
    // Within the bound, on the next attempt, it is charged as usual.
    const [next] = await node.poll({ waitMs: 1000 });
    if (!next) throw new Error('no second attempt');
    expect((await node.complete(next, JSON.stringify({ results: [] }), 2330)).statusCode).toBe(200);
    expect(await charges(jobId)).toMatchObject({ n: 1 });
  }, 60_000);
});

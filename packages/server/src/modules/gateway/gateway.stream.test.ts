import { request as httpRequest } from 'node:http';
import type { Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI from 'openai';
import { createGatewayHub, type HubMessage } from './hub.js';
import { costMicro, estimateTokens } from './pricing.js';
import {
  eventually,
  startGatewayFixture,
  type GatewayFixture,
  type GatewayNode,
} from '../../../test/gateway-fixture.js';

interface RequestRow {
  status: string;
  usage: Record<string, number> | null;
  charged_cents: number | null;
  error: string | null;
  work_id: string;
}

describe('streamed chat: a client that leaves, a node that fails mid-stream', () => {
  let f: GatewayFixture;
  let node: GatewayNode;
  beforeAll(async () => {
    f = await startGatewayFixture();
    node = await f.addNode({ country: 'CA' });
  });
  afterAll(() => f.close());

  const requestRow = async (id: string) =>
    (
      await f.server.ctx.db.query<RequestRow>(
        'SELECT status, usage, charged_cents, error, work_id FROM gateway_requests WHERE id = $1',
        [id],
      )
    ).rows[0];
  const balance = async () =>
    (await f.api('GET', '/api/v1/billing/balance')).json as { balance_cents: number; held_cents: number };

  /** Reads SSE events from a streamed response until `enough` says stop. */
  async function readEvents(res: Response, enough: (events: Record<string, unknown>[]) => boolean) {
    const reader = res.body?.getReader();
    if (!reader) throw new Error('no body');
    const events: Record<string, unknown>[] = [];
    let buffer = '';
    const decoder = new TextDecoder();
    while (!enough(events)) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let cut: number;
      while ((cut = buffer.indexOf('\n\n')) !== -1) {
        const line = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        if (line.startsWith('data: ') && line !== 'data: [DONE]')
          events.push(JSON.parse(line.slice(6)) as Record<string, unknown>);
      }
    }
    return { events, reader };
  }
  const contentOf = (events: Record<string, unknown>[]) =>
    events
      .map((e) => (e.choices as { delta?: { content?: string } }[] | undefined)?.[0]?.delta?.content ?? '')
      .join('');

  it('a client that disconnects mid-stream: the node is told to stop, and the buyer pays the prompt and what was generated', async () => {
    const before = await balance();
    // A long prompt makes a long echo (one word per chunk) and a bill in whole cents.
    const prompt = Array.from({ length: 100_000 }, (_, i) => `w${i % 10}`).join(' ');
    const controller = new AbortController();
    const res = await fetch(`${f.server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${f.buyer.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'phi-4', messages: [{ role: 'user', content: prompt }], stream: true }),
      signal: controller.signal,
    });
    expect(res.status).toBe(200);
    const id = res.headers.get('x-svc-completion-id') ?? '';
    const { events } = await readEvents(res, (e) => contentOf(e).split(' ').length >= 20);
    const seen = contentOf(events);
    controller.abort();

    const row = await eventually(async () => {
      const r = await requestRow(id);
      return r?.status === 'cancelled' ? r : undefined;
    });
    expect(row.error).toBe('the client disconnected');
    // The node heard it (events answer or heartbeat) and stopped without uploading anything.
    await eventually(() => node.workEvents().find((e) => e.job_id === id));
    expect(node.workEvents().find((e) => e.job_id === id)).toMatchObject({ outcome: 'cancelled' });
    expect((await f.api('GET', `/api/v1/job/receipts/${id}`)).json).toEqual({ receipts: [] });
    const { rows } = await f.server.ctx.db.query<{ status: string }>('SELECT status FROM work_items WHERE id = $1', [
      row.work_id,
    ]);
    expect(rows[0]?.status).toBe('cancelled');

    // Billed: the prompt (the agent's estimate rule) and the tokens generated before the stop.
    const promptTokens = estimateTokens(prompt);
    expect(row.usage?.prompt_tokens).toBe(promptTokens);
    const completion = row.usage?.completion_tokens ?? 0;
    expect(completion).toBeGreaterThanOrEqual(estimateTokens(seen));
    expect(completion).toBeLessThan(estimateTokens(`You said: ${prompt}`) / 10);
    const micro = costMicro('phi-4', { prompt_tokens: promptTokens, completion_tokens: completion });
    expect(row.charged_cents).toBeGreaterThanOrEqual(Math.floor(micro / 10_000));
    expect(row.charged_cents).toBeLessThanOrEqual(Math.ceil(micro / 10_000));
    expect(row.charged_cents).toBeGreaterThan(0);
    const after = await balance();
    expect(before.balance_cents - after.balance_cents).toBe(row.charged_cents);
    expect(after.held_cents).toBe(0);
  });

  it('a node failing mid-stream: an error chunk, then [DONE]; only the delivered tokens are billed', async () => {
    // The upstream cuts its connection after 6 SSE events (role chunk + 5 words).
    node.upstream?.setFailure({ dropAfterChunks: 6 });
    const res = await fetch(`${f.server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${f.buyer.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        model: 'tinyllama',
        messages: [{ role: 'user', content: 'one two three four five six seven eight nine ten' }],
        stream: true,
      }),
    });
    expect(res.status).toBe(200);
    const id = res.headers.get('x-svc-completion-id') ?? '';
    const body = await res.text();
    const lines = body.split('\n\n').filter(Boolean);
    expect(lines.at(-1)).toBe('data: [DONE]');
    const error = JSON.parse((lines.at(-2) ?? '').slice(6)) as {
      error: { message: string; type: string; param: null; code: string };
    };
    expect(error.error).toMatchObject({ type: 'api_error', param: null, code: 'upstream_error' });
    expect(error.error.message).toMatch(/failed mid-stream: upstream connection lost mid-stream/);
    const delivered = contentOf(lines.slice(0, -2).map((l) => JSON.parse(l.slice(6)) as Record<string, unknown>));
    expect(delivered).toBe('You said: one two three');
    const row = await eventually(async () => {
      const r = await requestRow(id);
      return r?.status === 'failed' ? r : undefined;
    });
    expect(row.usage).toEqual({ completion_tokens: estimateTokens(delivered) });
    expect((await balance()).held_cents).toBe(0);
  });

  it('the openai client raises the mid-stream error as an APIError after the delivered chunks', async () => {
    node.upstream?.setFailure({ dropAfterChunks: 3 });
    const stream = await f.openai().chat.completions.create({
      model: 'tinyllama',
      messages: [{ role: 'user', content: 'alpha beta gamma delta' }],
      stream: true,
    });
    const got: string[] = [];
    const error = await (async () => {
      for await (const chunk of stream) got.push(chunk.choices[0]?.delta.content ?? '');
    })().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.APIError);
    // The final `data:` event carries OpenAI's envelope: the client shows our message.
    expect((error as InstanceType<typeof OpenAI.APIError>).message).toMatch(
      /failed mid-stream: upstream connection lost mid-stream/,
    );
    expect(got.join('')).toBe('You said:');
  });

  it("opens the stream in one socket write: the headers, the role chunk and the node's first token leave together", async () => {
    // What reaches the server's socket for this request, one entry per write (a corked batch is one).
    // Node's http corks a response's socket from a write to the next tick, so the role chunk and
    // the first content chunk written in one tick leave with the headers: nothing is held back.
    const writes: string[] = [];
    const text = (chunk: unknown, encoding: BufferEncoding) =>
      typeof chunk === 'string'
        ? Buffer.from(chunk, encoding).toString('latin1')
        : (chunk as Buffer).toString('latin1');
    const spy = (socket: Socket) => {
      const one = socket._write.bind(socket);
      const many = socket._writev?.bind(socket);
      socket._write = (chunk, encoding, callback) => {
        writes.push(text(chunk, encoding));
        one(chunk, encoding, callback);
      };
      if (many)
        socket._writev = (chunks, callback) => {
          writes.push(chunks.map((c) => text(c.chunk, c.encoding)).join(''));
          many(chunks, callback);
        };
    };
    const server = f.server.app.server;
    server.on('connection', spy);
    try {
      const body = await new Promise<string>((resolve, reject) => {
        const req = httpRequest(
          `${f.server.url}/v1/chat/completions`,
          {
            method: 'POST',
            agent: false,
            headers: { authorization: `Bearer ${f.buyer.apiKey}`, 'content-type': 'application/json' },
          },
          (res) => {
            let all = '';
            res.setEncoding('utf8');
            res.on('data', (d: string) => (all += d));
            res.on('end', () => resolve(all));
          },
        );
        req.on('error', reject);
        req.end(
          JSON.stringify({ model: 'tinyllama', messages: [{ role: 'user', content: 'first token' }], stream: true }),
        );
      });
      expect(body).toContain('"content":"You"');
      expect(body.endsWith('data: [DONE]\n\n')).toBe(true);
    } finally {
      server.off('connection', spy);
    }
    const first = writes[0] ?? '';
    expect(first.startsWith('HTTP/1.1 200')).toBe(true);
    expect(first).toContain('"role":"assistant"');
    // The first token (the echo's first word) rides with the headers, not in a second write.
    expect(first).toContain('"delta":{"content":"You"}');
  });

  it('carries events over the bus to a listener on another instance, in order, and work changes as `changed`', async () => {
    // Two hubs on one store stand for two instances: the node posts to one, the buyer waits on the other.
    const nodeSide = await createGatewayHub(f.server.ctx);
    const buyerSide = await createGatewayHub(f.server.ctx);
    try {
      const heard: HubMessage[] = [];
      const stop = buyerSide.watch('wrk_bus_test', (m) => heard.push(m));
      const long = 'y'.repeat(10_000);
      await nodeSide.emitEvents('wrk_bus_test', [
        { type: 'delta', content: 'a' },
        { type: 'delta', content: long },
        { type: 'done', finish_reason: 'stop' },
      ]);
      await f.server.ctx.bus.publish('work', 'wrk_bus_test');
      await eventually(() => heard.some((m) => m.kind === 'changed'));
      stop();
      const events = heard.flatMap((m) => (m.kind === 'events' ? m.events : []));
      expect(events.map((e) => (e.type === 'delta' ? e.content : e.type)).join('')).toBe(`a${long}done`);
    } finally {
      await nodeSide.close();
      await buyerSide.close();
    }
  });
});

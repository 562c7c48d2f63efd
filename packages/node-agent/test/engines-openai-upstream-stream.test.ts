import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { ChatRequest } from '../src/engines/interface.js';
import { createOpenAIUpstreamEngine } from '../src/engines/openai-upstream.js';
import { DRAIN_LIMIT_BYTES } from '../src/engines/upstream-http.js';
import { eventually } from './helpers.js';

const MODELS = new Map([['tinyllama', 'tinyllama']]);
const HELLO: ChatRequest = { model: 'tinyllama', messages: [{ role: 'user', content: 'hello' }] };

const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
  `data: ${JSON.stringify({ object: 'chat.completion.chunk', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;

/**
 * An upstream whose streamed answer is the role chunk, "Hi", the finish chunk and `[DONE]`, then
 * `after(res)` (by default: end the body 20 ms later, as servers that flush `[DONE]` before
 * closing the stream do). Counts the TCP connections it accepts and those closed.
 */
async function startUpstream(after: (res: ServerResponse) => void = (res) => void setTimeout(() => res.end(), 20)) {
  const sockets: Socket[] = [];
  let closed = 0;
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      if ((JSON.parse(body) as { stream?: boolean }).stream !== true) {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ choices: [{ index: 0, message: { role: 'assistant', content: 'Hi' } }] }));
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(chunk({ role: 'assistant', content: '' }));
      res.write(chunk({ content: 'Hi' }));
      res.write(chunk({}, 'stop'));
      res.write('data: [DONE]\n\n');
      after(res);
    });
  });
  server.on('connection', (socket: Socket) => {
    sockets.push(socket);
    socket.on('close', () => closed++);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    get connections() {
      return sockets.length;
    },
    get closed() {
      return closed;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

let stops: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const stop of stops) await stop();
  stops = [];
});

async function setUp(after?: (res: ServerResponse) => void) {
  const upstream = await startUpstream(after);
  const engine = createOpenAIUpstreamEngine({ baseUrl: upstream.url, models: MODELS, timeoutMs: 5_000 });
  stops.push(
    () => engine.close(),
    () => upstream.close(),
  );
  return { upstream, engine };
}

describe('openai-upstream streamed chat: the upstream connection', () => {
  it('streamed chats in a row, and plain ones, share one kept-alive connection: the rest after [DONE] is read, not cut', async () => {
    const { upstream, engine } = await setUp();
    for (let i = 0; i < 3; i++) {
      const deltas: string[] = [];
      const answer = await engine.chat(HELLO, { onDelta: (d) => deltas.push(d) });
      expect(deltas).toEqual(['Hi']);
      expect(answer).toMatchObject({ content: 'Hi', finish_reason: 'stop' });
      // The body ends 20 ms after [DONE]: the connection goes back to the pool once it did.
      await new Promise((resolve) => setTimeout(resolve, 60));
    }
    expect((await engine.chat(HELLO)).content).toBe('Hi');
    expect(upstream.connections).toBe(1);
    expect(upstream.closed).toBe(0);
  });

  it('answers at [DONE] though the upstream holds the stream open after it', async () => {
    const { engine } = await setUp(() => undefined);
    const started = Date.now();
    const answer = await engine.chat(HELLO, { onDelta: () => undefined });
    expect(answer.content).toBe('Hi');
    expect(Date.now() - started).toBeLessThan(1_000);
  });

  it(`closes the connection when more than ${DRAIN_LIMIT_BYTES} bytes follow [DONE]`, async () => {
    const { upstream, engine } = await setUp((res) => {
      const filler = `: ${'x'.repeat(1_000)}\n`;
      const write = () => {
        if (res.destroyed) return;
        res.write(filler.repeat(16), () => setTimeout(write, 1));
      };
      write();
    });
    const answer = await engine.chat(HELLO, { onDelta: () => undefined });
    expect(answer.content).toBe('Hi');
    await eventually(() => upstream.closed >= 1, 'the upstream connection to be closed');
  });
});

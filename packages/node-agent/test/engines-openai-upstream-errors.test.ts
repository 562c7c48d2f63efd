import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { EngineError, type ChatRequest } from '../src/engines/interface.js';
import { createOpenAIUpstreamEngine } from '../src/engines/openai-upstream.js';
import { eventually } from './helpers.js';
import { startOpenAITestServer, type OpenAITestServer } from './testing.js';

const MODELS = new Map([
  ['tinyllama', 'tinyllama'],
  ['all-MiniLM-L6-v2', 'all-minilm'],
]);
const HELLO: ChatRequest = { model: 'tinyllama', messages: [{ role: 'user', content: 'hello there friend' }] };

async function engineError(promise: Promise<unknown>): Promise<EngineError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(EngineError);
  return error as EngineError;
}

/** A fetch answering every call with this body as a 200 response. */
function fetchReturning(body: string, contentType: string): typeof fetch {
  return async () => new Response(body, { status: 200, headers: { 'content-type': contentType } });
}

function streamOf(chunks: Uint8Array[]): ReadableStream<Uint8Array> {
  return new ReadableStream({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(chunk);
      controller.close();
    },
  });
}

let server: OpenAITestServer;
const engine = () => createOpenAIUpstreamEngine({ baseUrl: server.url, models: MODELS, timeoutMs: 2_000 });

beforeAll(async () => {
  server = await startOpenAITestServer();
});
afterEach(() => {
  server.setFailure(undefined);
  server.setDelay(0);
});
afterAll(async () => {
  await server.close();
});

describe('openai-upstream status mapping', () => {
  it('500 is retryable and carries the status', async () => {
    server.setFailure({ status: 500, message: 'boom' });
    const error = await engineError(engine().chat(HELLO));
    expect(error).toMatchObject({ retryable: true, status: 500, message: 'upstream returned 500: boom' });
  });

  it('429 is retryable; the failure lasts `times` requests', async () => {
    server.setFailure({ status: 429, times: 2 });
    const e = engine();
    expect(await engineError(e.chat(HELLO))).toMatchObject({ retryable: true, status: 429 });
    expect(await engineError(e.embed({ model: 'all-MiniLM-L6-v2', input: ['x'] }))).toMatchObject({
      retryable: true,
      status: 429,
    });
    expect((await e.chat(HELLO)).content).toBe('You said: hello there friend');
  });

  it("400 is final, with the upstream's own message", async () => {
    const error = await engineError(engine().chat({ ...HELLO, max_tokens: 0 }));
    expect(error).toMatchObject({ retryable: false, status: 400, message: "'max_tokens' must be a positive integer" });
  });

  it("a wrong upstream key (401) is retryable: it is this node's misconfiguration", async () => {
    const keyed = await startOpenAITestServer({ apiKey: 'right' });
    try {
      const wrong = createOpenAIUpstreamEngine({ baseUrl: keyed.url, apiKey: 'wrong', models: MODELS });
      const error = await engineError(wrong.chat(HELLO));
      expect(error).toMatchObject({
        retryable: true,
        status: 401,
        message: 'upstream returned 401: Incorrect API key provided',
      });
    } finally {
      await keyed.close();
    }
  });

  it('an unreachable upstream is retryable', async () => {
    const gone = await startOpenAITestServer();
    await gone.close();
    const error = await engineError(createOpenAIUpstreamEngine({ baseUrl: gone.url, models: MODELS }).chat(HELLO));
    expect(error.retryable).toBe(true);
    expect(error.message).toMatch(/^upstream request failed: .*ECONNREFUSED/);
  });

  it('an embedding of the wrong width is final', async () => {
    const narrow = await startOpenAITestServer({ embeddingDims: { 'all-minilm': 100 } });
    try {
      const e = createOpenAIUpstreamEngine({ baseUrl: narrow.url, models: MODELS });
      const error = await engineError(e.embed({ model: 'all-MiniLM-L6-v2', input: ['x'] }));
      expect(error).toMatchObject({
        retryable: false,
        message: 'upstream embedding has 100 dimensions; all-MiniLM-L6-v2 has 384',
      });
    } finally {
      await narrow.close();
    }
  });

  it('invalid JSON from the upstream is retryable', async () => {
    const e = createOpenAIUpstreamEngine({
      baseUrl: 'http://upstream.invalid/v1',
      models: MODELS,
      fetch: fetchReturning('<html>', 'text/html'),
    });
    expect(await engineError(e.chat(HELLO))).toMatchObject({
      retryable: true,
      message: 'upstream returned invalid JSON: <html>',
    });
  });
});

describe('openai-upstream timeouts and aborts', () => {
  it('times out as a retryable error naming the limit', async () => {
    server.setDelay(1_000);
    const started = Date.now();
    const e = createOpenAIUpstreamEngine({ baseUrl: server.url, models: MODELS, timeoutMs: 100 });
    const error = await engineError(e.chat(HELLO));
    expect(error).toMatchObject({ retryable: true, message: 'upstream timed out after 100 ms' });
    expect(Date.now() - started).toBeLessThan(900);
  });

  it("the caller's abort is final", async () => {
    server.setDelay(1_000);
    const controller = new AbortController();
    const before = server.requests.length;
    const pending = engineError(engine().chat(HELLO, { signal: controller.signal }));
    // Aborted while the upstream holds the request.
    await eventually(() => server.requests.length > before, 'the upstream to receive the request');
    controller.abort();
    const error = await pending;
    expect(error).toMatchObject({ retryable: false, message: 'request aborted by the caller' });
  });

  it('close() fails the calls in flight as retryable', async () => {
    server.setDelay(1_000);
    const e = engine();
    const before = server.requests.length;
    const pending = engineError(e.chat(HELLO));
    await eventually(() => server.requests.length > before, 'the upstream to receive the request');
    void e.close();
    expect(await pending).toMatchObject({ retryable: true, message: 'engine closed' });
  });
});

describe('openai-upstream broken streams', () => {
  it('a connection dropped mid-stream is a retryable EngineError after the deltas already sent', async () => {
    server.setFailure({ dropAfterChunks: 2 }); // the role chunk and the first word
    const deltas: string[] = [];
    const error = await engineError(engine().chat(HELLO, { onDelta: (t) => deltas.push(t) }));
    expect(deltas).toEqual(['You']);
    expect(error.retryable).toBe(true);
    expect(error.message).toMatch(/^upstream connection lost mid-stream/);
  });

  it('a connection dropped before any answer is retryable', async () => {
    server.setFailure({ dropAfterChunks: 0 });
    const error = await engineError(engine().chat(HELLO));
    expect(error.retryable).toBe(true);
    expect(error.message).toMatch(/^upstream request failed/);
  });

  it('a stream that ends with neither [DONE] nor finish_reason counts as dropped', async () => {
    const body = 'data: {"choices":[{"index":0,"delta":{"content":"Hi"}}]}\n\n';
    const e = createOpenAIUpstreamEngine({
      baseUrl: 'http://upstream.invalid/v1',
      models: MODELS,
      fetch: fetchReturning(body, 'text/event-stream'),
    });
    const error = await engineError(e.chat(HELLO, { onDelta: () => undefined }));
    expect(error).toMatchObject({
      retryable: true,
      message: 'upstream connection lost mid-stream: the stream ended before [DONE]',
    });
  });

  it('parses CRLF, comments, events split mid-character, and a stream without [DONE] but with finish_reason', async () => {
    const text =
      ': keep-alive\r\n\r\n' +
      'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\r\n\r\n' +
      'data: {"choices":[{"index":0,"delta":{"content":"héllo "}}]}\r\n\r\n' +
      'data: {"choices":[{"index":0,"delta":{"content":"wörld ✓"},"finish_reason":"stop"}]}\r\n\r\n';
    const bytes = Buffer.from(text, 'utf8');
    const pieces: Uint8Array[] = [];
    for (let i = 0; i < bytes.length; i += 3) pieces.push(bytes.subarray(i, i + 3));
    const fetchSplit: typeof fetch = async () =>
      new Response(streamOf(pieces), { headers: { 'content-type': 'text/event-stream' } });
    const e = createOpenAIUpstreamEngine({ baseUrl: 'http://upstream.invalid/v1', models: MODELS, fetch: fetchSplit });
    const deltas: string[] = [];
    const result = await e.chat(HELLO, { onDelta: (t) => deltas.push(t) });
    expect(deltas).toEqual(['héllo ', 'wörld ✓']);
    expect(result.content).toBe('héllo wörld ✓');
    expect(result.finish_reason).toBe('stop');
    // No usage chunk: estimated, 'hello there friend' is 18 bytes -> 5, 'héllo wörld ✓' 17 bytes -> 5
    expect(result.usage).toEqual({ prompt_tokens: 5, completion_tokens: 5 });
  });

  it('an error event inside the stream becomes an EngineError', async () => {
    const body = 'data: {"error":{"message":"model crashed"}}\n\n';
    const e = createOpenAIUpstreamEngine({
      baseUrl: 'http://upstream.invalid/v1',
      models: MODELS,
      fetch: fetchReturning(body, 'text/event-stream'),
    });
    expect(await engineError(e.chat(HELLO, { onDelta: () => undefined }))).toMatchObject({
      retryable: true,
      message: 'upstream stream error: model crashed',
    });
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSineWav, startOpenAITestServer, type OpenAITestServer } from './testing.js';

let server: OpenAITestServer;

beforeAll(async () => {
  server = await startOpenAITestServer({ apiKey: 'k' });
});
afterAll(async () => {
  await server.close();
});

const auth = { authorization: 'Bearer k' };
const post = (path: string, body: unknown, headers: Record<string, string> = auth) =>
  fetch(`${server.url}${path}`, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });

describe('OpenAI test server', () => {
  it('listens on 127.0.0.1 under /v1 and lists models', async () => {
    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);
    const res = await fetch(`${server.url}/models`, { headers: auth });
    const body = (await res.json()) as { object: string; data: { id: string; object: string }[] };
    expect(body.object).toBe('list');
    expect(body.data.map((m) => m.id)).toContain('tinyllama');
    expect(body.data[0]?.object).toBe('model');
  });

  it('answers a missing key with 401 in OpenAI error format', async () => {
    const res = await post('/chat/completions', {}, {});
    expect(res.status).toBe(401);
    expect(await res.json()).toEqual({
      error: {
        message: 'Incorrect API key provided',
        type: 'invalid_request_error',
        param: null,
        code: 'invalid_api_key',
      },
    });
  });

  it("streams in OpenAI's exact SSE format: role first, one chunk per word, finish, usage with empty choices, [DONE]", async () => {
    const res = await post('/chat/completions', {
      model: 'tinyllama',
      messages: [{ role: 'user', content: 'hi' }],
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    const text = await res.text();
    const frames = text.split('\n\n');
    expect(frames.at(-1)).toBe('');
    expect(frames.at(-2)).toBe('data: [DONE]');
    const chunks = frames.slice(0, -2).map((f) => {
      expect(f.startsWith('data: ')).toBe(true);
      return JSON.parse(f.slice(6)) as {
        object: string;
        id: string;
        choices: { delta: unknown; finish_reason: unknown }[];
        usage: unknown;
      };
    });
    expect(new Set(chunks.map((c) => c.object))).toEqual(new Set(['chat.completion.chunk']));
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
    expect(chunks.map((c) => c.choices[0]?.delta ?? null)).toEqual([
      { role: 'assistant', content: '' },
      { content: 'You' },
      { content: ' said:' },
      { content: ' hi' },
      {},
      null,
    ]);
    expect(chunks[4]?.choices[0]?.finish_reason).toBe('stop');
    expect(chunks.slice(0, 5).every((c) => c.usage === null)).toBe(true);
    expect(chunks[5]).toMatchObject({
      choices: [],
      usage: { prompt_tokens: 1, completion_tokens: 3, total_tokens: 4 },
    });
  });

  it('transcribes multipart WAV uploads with their duration, in every response_format', async () => {
    const wav = createSineWav({ seconds: 1.25 });
    const form = (format: string): FormData => {
      const f = new FormData();
      f.set('file', new Blob([wav], { type: 'audio/wav' }), 'a.wav');
      f.set('model', 'whisper-base');
      f.set('response_format', format);
      return f;
    };
    const call = (format: string) =>
      fetch(`${server.url}/audio/transcriptions`, { method: 'POST', headers: auth, body: form(format) });
    const text = `transcribed ${wav.length} bytes of audio`;
    expect(await (await call('json')).json()).toEqual({ text });
    expect(await (await call('text')).text()).toBe(`${text}\n`);
    const verbose = (await (await call('verbose_json')).json()) as {
      duration: number;
      segments: { start: number; end: number; text: string }[];
    };
    expect(verbose.duration).toBe(1.25);
    expect(verbose.segments[0]).toMatchObject({ start: 0, end: 1.25, text });
    expect(server.requests.at(-1)?.form?.files).toEqual([
      { field: 'file', filename: 'a.wav', type: 'audio/wav', size: wav.length },
    ]);
    const missing = await fetch(`${server.url}/audio/transcriptions`, {
      method: 'POST',
      headers: auth,
      body: new FormData(),
    });
    expect(missing.status).toBe(400);
  });

  it('validates requests with 400 and unknown paths with 404', async () => {
    expect((await post('/chat/completions', { model: 'tinyllama' })).status).toBe(400);
    expect((await post('/embeddings', { model: 'x', input: [1] })).status).toBe(400);
    expect((await post('/images/generations', { model: 'x', prompt: 'p', size: 'big' })).status).toBe(400);
    expect((await post('/nothing', {})).status).toBe(404);
  });
});

import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createOpenAIUpstreamEngine } from '../src/engines/openai-upstream.js';
import type { Engine } from '../src/engines/interface.js';
import { followersOf } from './helpers.js';
import { createSineWav, PNG_SIGNATURE, startOpenAITestServer, type OpenAITestServer } from './testing.js';

const MODELS = new Map([
  ['tinyllama', 'tinyllama'],
  ['all-MiniLM-L6-v2', 'all-minilm'],
  ['nomic-embed-text', 'nomic-embed-text'],
  ['whisper-base', 'whisper-1'],
  ['sdxl-turbo', 'sdxl-turbo'],
]);

function cosine(a: number[], b: number[]): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  a.forEach((x, i) => {
    const y = b[i] ?? 0;
    dot += x * y;
    na += x * x;
    nb += y * y;
  });
  return dot / Math.sqrt(na * nb);
}

let server: OpenAITestServer;
let engine: Engine;

beforeAll(async () => {
  server = await startOpenAITestServer({ apiKey: 'sk-upstream' });
  engine = createOpenAIUpstreamEngine({ baseUrl: server.url, apiKey: 'sk-upstream', models: MODELS });
});

afterAll(async () => {
  await engine.close();
  await server.close();
});

describe('openai-upstream chat', () => {
  it('keeps nothing of a finished call on the signal it followed (no timer, listener or dependant per call)', async () => {
    const stop = new AbortController();
    for (let i = 0; i < 30; i++) {
      await engine.chat(
        { model: 'tinyllama', messages: [{ role: 'user', content: `plain ${i}` }] },
        { signal: stop.signal },
      );
      await engine.chat(
        { model: 'tinyllama', messages: [{ role: 'user', content: `streamed ${i}` }] },
        { signal: stop.signal, onDelta: () => undefined },
      );
      await engine.embed({ model: 'all-MiniLM-L6-v2', input: [`embedded ${i}`] }, { signal: stop.signal });
    }
    // One listener stands for every call in flight; Node 20's AbortSignal.any kept one composite a call.
    expect(followersOf(stop.signal)).toBeLessThanOrEqual(1);
  });

  it("sends JSON calls (chat, embeddings) and streamed chats through undici's request, not fetch", async () => {
    const spy = vi.spyOn(globalThis, 'fetch');
    try {
      const chat = await engine.chat({ model: 'tinyllama', messages: [{ role: 'user', content: 'no fetch' }] });
      expect(chat.content).toBe('You said: no fetch');
      const embedded = await engine.embed({ model: 'all-MiniLM-L6-v2', input: ['no fetch'] });
      expect(embedded.embeddings[0]).toHaveLength(384);
      expect(spy).not.toHaveBeenCalled();
      const deltas: string[] = [];
      await engine.chat(
        { model: 'tinyllama', messages: [{ role: 'user', content: 'streamed' }] },
        { onDelta: (d) => deltas.push(d) },
      );
      expect(deltas.join('')).toBe('You said: streamed');
      expect(spy).not.toHaveBeenCalled();
    } finally {
      spy.mockRestore();
    }
  });

  it('returns the completion, finish reason and reported usage, sending the upstream model name and key', async () => {
    const result = await engine.chat({
      model: 'tinyllama',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'hello there' },
      ],
      temperature: 0,
    });
    expect(result).toEqual({
      content: 'You said: hello there',
      finish_reason: 'stop',
      usage: { prompt_tokens: 4, completion_tokens: 4 },
    });
    const sent = server.requests.at(-1);
    expect(sent?.path).toBe('/v1/chat/completions');
    expect(sent?.headers.authorization).toBe('Bearer sk-upstream');
    expect(sent?.body).toMatchObject({ model: 'tinyllama', temperature: 0 });
    expect((sent?.body as { stream?: unknown }).stream).toBeUndefined();
  });

  it('passes max_tokens and reports finish_reason length', async () => {
    const result = await engine.chat({
      model: 'tinyllama',
      messages: [{ role: 'user', content: 'one two three four' }],
      max_tokens: 3,
    });
    expect(result.content).toBe('You said: one');
    expect(result.finish_reason).toBe('length');
    expect(server.requests.at(-1)?.body).toMatchObject({ max_tokens: 3 });
  });

  it('streams: deltas arrive in order, concatenate to the content, and usage comes from the usage chunk', async () => {
    const deltas: string[] = [];
    const result = await engine.chat(
      { model: 'tinyllama', messages: [{ role: 'user', content: 'stream me a reply' }] },
      { onDelta: (text) => deltas.push(text) },
    );
    expect(deltas).toEqual(['You', ' said:', ' stream', ' me', ' a', ' reply']);
    expect(deltas.join('')).toBe(result.content);
    expect(result).toEqual({
      content: 'You said: stream me a reply',
      finish_reason: 'stop',
      usage: { prompt_tokens: 4, completion_tokens: 6 },
    });
    expect(server.requests.at(-1)?.body).toMatchObject({ stream: true, stream_options: { include_usage: true } });
  });

  it('rejects an unknown catalogue id without calling the upstream', async () => {
    const before = server.requests.length;
    await expect(engine.chat({ model: 'phi-4', messages: [{ role: 'user', content: 'x' }] })).rejects.toMatchObject({
      name: 'EngineError',
      message: 'model phi-4 is not served by this engine',
    });
    expect(server.requests.length).toBe(before);
  });

  it('lists the catalogue ids it serves', () => {
    expect(engine.models()).toEqual([...MODELS.keys()]);
  });
});

describe('openai-upstream embeddings', () => {
  it('returns one vector per input with the catalogue dimensions and reported usage', async () => {
    const result = await engine.embed({ model: 'all-MiniLM-L6-v2', input: ['the cat sat on the mat', 'hello'] });
    expect(result.embeddings.map((v) => v.length)).toEqual([384, 384]);
    expect(result.prompt_tokens).toBe(7);
    expect(server.requests.at(-1)?.body).toMatchObject({ model: 'all-minilm', encoding_format: 'float' });
    const nomic = await engine.embed({ model: 'nomic-embed-text', input: ['hello'] });
    expect(nomic.embeddings[0]?.length).toBe(768);
  });

  it('places similar texts nearer than unrelated ones', async () => {
    const { embeddings } = await engine.embed({
      model: 'all-MiniLM-L6-v2',
      input: ['the cat sat on the mat', 'the cat sat on a mat', 'quarterly revenue grew strongly last fiscal year'],
    });
    const [cat, cat2, revenue] = embeddings as [number[], number[], number[]];
    expect(cosine(cat, cat2)).toBeGreaterThan(0.6);
    expect(cosine(cat, cat2)).toBeGreaterThan(cosine(cat, revenue) + 0.3);
  });
});

describe('openai-upstream transcription', () => {
  it('sends multipart verbose_json and returns text, duration and segments', async () => {
    const wav = createSineWav({ seconds: 2.5 });
    const result = await engine.transcribe({ model: 'whisper-base', audio: wav, filename: 'tone.wav', language: 'en' });
    expect(result).toEqual({
      text: `transcribed ${wav.length} bytes of audio`,
      language: 'en',
      duration: 2.5,
      segments: [{ start: 0, end: 2.5, text: `transcribed ${wav.length} bytes of audio` }],
    });
    const form = server.requests.at(-1)?.form;
    expect(form?.fields).toEqual({ model: 'whisper-1', response_format: 'verbose_json', language: 'en' });
    expect(form?.files).toEqual([{ field: 'file', filename: 'tone.wav', type: 'audio/wav', size: wav.length }]);
  });

  it('reads the duration from the WAV header when the upstream answers with text only', async () => {
    const textOnly = await startOpenAITestServer({ transcriptionFormat: 'text-only' });
    const plain = createOpenAIUpstreamEngine({ baseUrl: textOnly.url, models: MODELS });
    try {
      const wav = createSineWav({ seconds: 2.5 });
      const result = await plain.transcribe({ model: 'whisper-base', audio: wav, filename: 'tone.wav' });
      expect(result.duration).toBe(2.5);
      expect(result.language).toBe('unknown');
      expect(result.segments).toEqual([{ start: 0, end: 2.5, text: result.text }]);
      const mp3 = await plain.transcribe({
        model: 'whisper-base',
        audio: Buffer.from('ID3 not a wav'),
        filename: 'a.mp3',
      });
      expect(mp3.duration).toBe(0);
      expect(textOnly.requests.at(-1)?.form?.files[0]?.type).toBe('audio/mpeg');
    } finally {
      await plain.close();
      await textOnly.close();
    }
  });

  it('measures every accepted format itself when the upstream answers with text only (what the server checks the receipt against)', async () => {
    const textOnly = await startOpenAITestServer({ transcriptionFormat: 'text-only' });
    const plain = createOpenAIUpstreamEngine({ baseUrl: textOnly.url, models: MODELS });
    const samples = new URL('../../server/test/audio/', import.meta.url);
    try {
      for (const [file, seconds] of [
        ['tone-3.2s.mp3', 3.2],
        ['tone-4.1s.flac', 4.1],
        ['tone-5.3s.ogg', 5.3],
        ['tone-6.4s.m4a', 6.4],
        ['tone-7.6s.webm', 7.6],
      ] as const) {
        const audio = await readFile(new URL(file, samples));
        const result = await plain.transcribe({ model: 'whisper-base', audio, filename: file });
        expect(Math.abs(result.duration - seconds), file).toBeLessThan(0.1);
      }
    } finally {
      await plain.close();
      await textOnly.close();
    }
  });
});

describe('openai-upstream images', () => {
  it('asks for b64_json and decodes PNG bytes', async () => {
    const result = await engine.generateImage({ model: 'sdxl-turbo', prompt: 'a red fox', n: 2, size: '32x16' });
    expect(result.images).toHaveLength(2);
    for (const image of result.images) {
      expect(image.content_type).toBe('image/png');
      expect(image.bytes.subarray(0, 8).equals(PNG_SIGNATURE)).toBe(true);
      expect(image.bytes.readUInt32BE(16)).toBe(32); // IHDR width
      expect(image.bytes.readUInt32BE(20)).toBe(16); // IHDR height
    }
    expect(server.requests.at(-1)?.body).toMatchObject({ response_format: 'b64_json', n: 2, size: '32x16' });
  });

  it('downloads the images when the upstream answers with URLs', async () => {
    const urls = await startOpenAITestServer({ imageResponse: 'url' });
    const viaUrl = createOpenAIUpstreamEngine({ baseUrl: urls.url, models: MODELS });
    try {
      const result = await viaUrl.generateImage({ model: 'sdxl-turbo', prompt: 'a fox', n: 1, size: '1024x1024' });
      expect(result.images[0]?.bytes.subarray(0, 8).equals(PNG_SIGNATURE)).toBe(true);
      expect(result.images[0]?.bytes.readUInt32BE(16)).toBe(64); // capped by the test server
      expect(urls.requests.map((r) => `${r.method} ${r.path.replace(/img-test-\d+/, 'ID')}`)).toEqual([
        'POST /v1/images/generations',
        'GET /v1/files/ID.png',
      ]);
    } finally {
      await viaUrl.close();
      await urls.close();
    }
  });
});

describe('openai-upstream usage estimation', () => {
  it('estimates tokens as ceil(UTF-8 bytes / 4) when the upstream omits usage', async () => {
    const silent = await startOpenAITestServer({ omitUsage: true });
    const counting = createOpenAIUpstreamEngine({ baseUrl: silent.url, models: MODELS });
    try {
      const messages = [
        { role: 'system' as const, content: 'Be brief.' }, // 9 bytes -> 3
        { role: 'user' as const, content: 'hello there' }, // 11 bytes -> 3
      ];
      const plain = await counting.chat({ model: 'tinyllama', messages });
      // 'You said: hello there' is 21 bytes -> 6
      expect(plain.usage).toEqual({ prompt_tokens: 6, completion_tokens: 6 });
      const streamed = await counting.chat({ model: 'tinyllama', messages }, { onDelta: () => undefined });
      expect(streamed.usage).toEqual({ prompt_tokens: 6, completion_tokens: 6 });
      const embedded = await counting.embed({ model: 'all-MiniLM-L6-v2', input: ['hello there', 'é'] });
      expect(embedded.prompt_tokens).toBe(3 + 1);
    } finally {
      await counting.close();
      await silent.close();
    }
  });
});

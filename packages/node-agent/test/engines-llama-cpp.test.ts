import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Engine } from '../src/engines/interface.js';
import { createLlamaCppEngine, probeLlamaCpp } from '../src/engines/llama-cpp.js';
import { createTinyGguf } from '../src/engines/tiny-gguf.js';

const probe = await probeLlamaCpp();
if (!probe.available) console.log(`[svc test] SKIPPED llama-cpp engine tests: ${probe.reason}`);

describe.skipIf(!probe.available)('llama-cpp engine on generated tiny GGUF models', () => {
  let dir: string;
  let engine: Engine;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'svc-gguf-'));
    const chat = await createTinyGguf({ path: join(dir, 'chat.gguf'), kind: 'chat' });
    const embedding = await createTinyGguf({ path: join(dir, 'embed.gguf'), kind: 'embedding' });
    engine = await createLlamaCppEngine({
      models: new Map([
        ['tinyllama', chat.path],
        ['all-MiniLM-L6-v2', embedding.path],
      ]),
      threads: 1,
      gpu: false,
    });
  });

  afterAll(async () => {
    await engine?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('serves the mapped catalogue ids', () => {
    expect(engine.name).toBe('llama-cpp');
    expect(engine.models()).toEqual(['tinyllama', 'all-MiniLM-L6-v2']);
  });

  it('streams chat token by token and counts usage with the model tokenizer', async () => {
    const deltas: string[] = [];
    const result = await engine.chat(
      {
        model: 'tinyllama',
        messages: [
          { role: 'system', content: 'Be brief.' },
          { role: 'user', content: 'hello' },
        ],
        max_tokens: 6,
        temperature: 0,
      },
      { onDelta: (text) => deltas.push(text) },
    );
    expect(deltas.length).toBeGreaterThanOrEqual(1);
    expect(deltas.join('')).toBe(result.content);
    expect(result.content.length).toBeGreaterThan(0);
    // The tiny model never emits end-of-generation, so it stops at max_tokens.
    expect(result.finish_reason).toBe('length');
    expect(result.usage.completion_tokens).toBe(6);
    // Byte-level vocabulary: the prompt costs at least one token per byte of its text.
    expect(result.usage.prompt_tokens).toBeGreaterThan('Be brief.hello'.length);
  });

  it('is deterministic at temperature 0, without streaming too', async () => {
    const request = {
      model: 'tinyllama',
      messages: [{ role: 'user' as const, content: 'same prompt' }],
      max_tokens: 5,
      temperature: 0,
    };
    const first = await engine.chat(request);
    const second = await engine.chat(request, { onDelta: () => undefined });
    expect(second.content).toBe(first.content);
  });

  it('embeds through the embedding context with the catalogue dimensions and tokenizer usage', async () => {
    const result = await engine.embed({ model: 'all-MiniLM-L6-v2', input: ['hello world', 'another text'] });
    expect(result.embeddings.map((v) => v.length)).toEqual([384, 384]);
    expect(result.embeddings[0]).not.toEqual(result.embeddings[1]);
    expect(result.embeddings.flat().every(Number.isFinite)).toBe(true);
    expect(result.prompt_tokens).toBeGreaterThanOrEqual('hello world'.length + 'another text'.length);
  });

  it('refuses transcription, images and models it does not load, as final errors', async () => {
    await expect(
      engine.transcribe({ model: 'whisper-base', audio: Buffer.alloc(4), filename: 'a.wav' }),
    ).rejects.toMatchObject({
      retryable: false,
      message: 'transcription is not supported by llama-cpp',
    });
    await expect(engine.generateImage({ model: 'sdxl-turbo', prompt: 'x', n: 1, size: '64x64' })).rejects.toMatchObject(
      {
        retryable: false,
        message: 'image generation is not supported by llama-cpp',
      },
    );
    await expect(engine.embed({ model: 'tinyllama', input: ['x'] })).rejects.toMatchObject({ name: 'EngineError' });
  });

  it('refuses at start-up a GGUF whose embedding width differs from the catalogue', async () => {
    const narrow = await createTinyGguf({ path: join(dir, 'narrow.gguf'), kind: 'embedding', dims: 64 });
    await expect(
      createLlamaCppEngine({ models: new Map([['all-MiniLM-L6-v2', narrow.path]]), threads: 1, gpu: false }),
    ).rejects.toMatchObject({
      retryable: false,
      message: `${narrow.path} embeds in 64 dimensions; all-MiniLM-L6-v2 has 384`,
    });
  });

  it('stops on the caller abort with a final error', async () => {
    const controller = new AbortController();
    controller.abort();
    await expect(
      engine.chat(
        { model: 'tinyllama', messages: [{ role: 'user', content: 'x' }], max_tokens: 50 },
        { signal: controller.signal },
      ),
    ).rejects.toMatchObject({ retryable: false, message: 'request aborted by the caller' });
  });
});

import { writeFile, mkdtemp, rm } from 'node:fs/promises';
import { createReadStream } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import OpenAI from 'openai';
import { verifySvc1 } from '@svc/protocol';
import { createSineWav, PNG_SIGNATURE } from '@svc/node-agent/testing';
import { createKey, signUp } from '../../../test/harness.js';
import { startGatewayFixture, type GatewayFixture, type GatewayNode } from '../../../test/gateway-fixture.js';
import { presignFileUrl } from './files.js';
import { readWorkResult } from '../work/results.js';

type Receipt = {
  id: string;
  job_id: string;
  node_id: string;
  node_public_key: string;
  result_hash: string;
  metering_units: number;
  signature: string;
  metadata: Record<string, unknown>;
};

describe('the gateway through the official openai client, a real server and a real node agent', () => {
  let f: GatewayFixture;
  let node: GatewayNode;
  let client: OpenAI;
  beforeAll(async () => {
    f = await startGatewayFixture();
    node = await f.addNode({ country: 'CA', region: 'ca-central', gpuModel: 'NVIDIA L4' });
    client = f.openai();
  });
  afterAll(() => f.close());

  const receiptsOf = async (id: string) =>
    (await f.api('GET', `/api/v1/job/receipts/${id}`)).json.receipts as Receipt[];
  const balance = async () => Number((await f.api('GET', '/api/v1/billing/balance')).json.balance_cents);

  it('lists the catalogue as OpenAI models', async () => {
    const page = await client.models.list();
    const ids = page.data.map((m) => m.id);
    expect(ids).toEqual([
      'phi-4',
      'svc-llama-3.2-3b',
      'tinyllama',
      'all-MiniLM-L6-v2',
      'nomic-embed-text',
      'whisper-base',
      'sdxl-turbo',
    ]);
    expect(page.data[0]).toMatchObject({ object: 'model', owned_by: 'svc', created: 1_735_689_600 });
  });

  it('hands the answer from the accepted receipt to the waiting request in memory, reading nothing back from the store', async () => {
    const reads = vi.spyOn(f.server.ctx.blobs, 'get');
    try {
      const completion = await client.chat.completions.create({
        model: 'tinyllama',
        messages: [{ role: 'user', content: 'in memory' }],
      });
      expect(completion.choices[0]?.message.content).toBe('You said: in memory');
      expect(reads).not.toHaveBeenCalled();
      // The answer is what was stored and receipted all the same (by the writer, behind the answer).
      await f.server.ctx.writer.settled();
      const { rows } = await f.server.ctx.db.query<{ id: string }>('SELECT id FROM work_items WHERE job_id = $1', [
        completion.id,
      ]);
      const stored = await readWorkResult(f.server.ctx, rows[0]?.id ?? '');
      expect(JSON.parse(stored?.bytes.toString('utf8') ?? '{}')).toMatchObject({ content: 'You said: in memory' });
      // Small enough to be kept in the work item's row: no object written for it.
      expect(await f.server.ctx.blobs.get(`results/${rows[0]?.id ?? ''}`)).toBeUndefined();
    } finally {
      reads.mockRestore();
    }
  });

  it('answers a chat completion with usage, svc_node, X-SVC-Node and an SVC1 receipt retrievable by the completion id', async () => {
    const { data, response } = await client.chat.completions
      .create({
        model: 'tinyllama',
        messages: [
          { role: 'system', content: 'Be brief.' },
          { role: 'user', content: 'hello there gateway' },
        ],
        temperature: 0.2,
        top_p: 0.9,
        user: 'u-1',
      })
      .withResponse();
    expect(data.id).toMatch(/^chatcmpl-[0-9a-z]{26}$/);
    expect(data.object).toBe('chat.completion');
    expect(data.choices[0]?.message).toEqual({ role: 'assistant', content: 'You said: hello there gateway' });
    expect(data.choices[0]?.finish_reason).toBe('stop');
    // The test server counts words: prompt 2 + 3, completion 5.
    expect(data.usage).toEqual({ prompt_tokens: 5, completion_tokens: 5, total_tokens: 10 });
    const extra = data as unknown as { svc_node: Record<string, unknown>; svc_receipt_id: string };
    expect(extra.svc_node).toEqual({
      node_id: node.nodeId,
      gpu_model: 'NVIDIA L4',
      region: 'ca-central',
      country: 'CA',
    });
    expect(response.headers.get('x-svc-node')).toBe(node.nodeId);
    const receiptId = response.headers.get('x-svc-receipt');
    expect(receiptId).toBe(extra.svc_receipt_id);

    const [receipt] = await receiptsOf(data.id);
    expect(receipt).toMatchObject({ id: receiptId, job_id: data.id, node_id: node.nodeId, metering_units: 10 });
    expect(receipt?.metadata).toMatchObject({
      model: 'tinyllama',
      node_id: node.nodeId,
      gpu_model: 'NVIDIA L4',
      country: 'CA',
      region: 'ca-central',
      jurisdiction: null,
      strict_jurisdiction: null,
      request_type: 'chat',
    });
    const fields = {
      job_id: data.id,
      node_public_key_hex: String(receipt?.node_public_key),
      result_hash_hex: String(receipt?.result_hash),
      metering_units: 10,
    };
    expect(verifySvc1(fields, String(receipt?.signature))).toBe(true);
    // The upstream got the request as the buyer sent it (defaults applied; the sampling fields too, issue 41).
    const upstreamBody = node.upstream?.requests.at(-1)?.body as Record<string, unknown>;
    expect(upstreamBody).toMatchObject({ model: 'tinyllama', temperature: 0.2, top_p: 0.9, user: 'u-1' });
    expect(upstreamBody.max_tokens).toBeUndefined();
  });

  it('streams a chat completion in OpenAI chunks: role and svc_node first, deltas, finish, the usage chunk with the receipt id, [DONE]', async () => {
    const { data: stream, response } = await client.chat.completions
      .create({
        model: 'tinyllama',
        messages: [{ role: 'user', content: 'one two three four five six' }],
        stream: true,
        stream_options: { include_usage: true },
      })
      .withResponse();
    expect(response.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(response.headers.get('x-svc-node')).toBe(node.nodeId);
    const chunks: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    const first = chunks[0] as OpenAI.Chat.Completions.ChatCompletionChunk & { svc_node?: unknown };
    expect(first.choices[0]?.delta.role).toBe('assistant');
    expect(first.svc_node).toEqual({
      node_id: node.nodeId,
      gpu_model: 'NVIDIA L4',
      region: 'ca-central',
      country: 'CA',
    });
    expect(chunks.every((c) => c.id === first.id && c.object === 'chat.completion.chunk')).toBe(true);
    const text = chunks.map((c) => c.choices[0]?.delta.content ?? '').join('');
    expect(text).toBe('You said: one two three four five six');
    expect(chunks.filter((c) => (c.choices[0]?.delta.content ?? '') !== '').length).toBeGreaterThan(1);
    const finish = chunks.at(-2);
    expect(finish?.choices[0]?.finish_reason).toBe('stop');
    const last = chunks.at(-1) as OpenAI.Chat.Completions.ChatCompletionChunk & { svc_receipt_id?: string };
    expect(last.choices).toEqual([]);
    expect(last.usage).toEqual({ prompt_tokens: 6, completion_tokens: 8, total_tokens: 14 });
    const [receipt] = await receiptsOf(first.id);
    expect(last.svc_receipt_id).toBe(receipt?.id);
    expect(receipt?.metering_units).toBe(14);
  });

  it('streams without include_usage: no usage chunk, the receipt id on the finish chunk', async () => {
    const res = await fetch(`${f.server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${f.buyer.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'tinyllama', messages: [{ role: 'user', content: 'hi' }], stream: true }),
    });
    const body = await res.text();
    expect(body.endsWith('data: [DONE]\n\n')).toBe(true);
    const events = body.split('\n\n').filter(Boolean);
    expect(events.every((e) => e.startsWith('data: '))).toBe(true);
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e.slice(6)) as Record<string, unknown>);
    expect(chunks.some((c) => 'usage' in c)).toBe(false);
    expect(chunks.at(-1)).toMatchObject({
      choices: [{ index: 0, delta: {}, finish_reason: 'stop' }],
      svc_receipt_id: expect.stringMatching(/^rcpt_/),
    });
  });

  it('embeds a text and a batch in 384 dimensions (float and the SDK default base64)', async () => {
    const one = await client.embeddings.create({
      model: 'all-MiniLM-L6-v2',
      input: 'the cat sat',
      encoding_format: 'float',
    });
    expect(one.data).toHaveLength(1);
    expect(one.data[0]?.embedding).toHaveLength(384);
    expect(one.usage).toEqual({ prompt_tokens: 3, total_tokens: 3 });
    const { data: batch, response } = await client.embeddings
      .create({ model: 'all-MiniLM-L6-v2', input: ['the cat sat', 'a dog ran', 'the cat sat'] })
      .withResponse();
    expect(batch.data.map((d) => [d.index, d.embedding.length])).toEqual([
      [0, 384],
      [1, 384],
      [2, 384],
    ]);
    // base64 float32 decoded by the SDK: equal to the float answer within float32 precision.
    expect(batch.data[0]?.embedding[0]).toBeCloseTo(one.data[0]?.embedding[0] ?? NaN, 6);
    expect(batch.data[2]?.embedding).toEqual(batch.data[0]?.embedding);
    expect(response.headers.get('x-svc-receipt')).toMatch(/^rcpt_/);
    await expect(
      client.embeddings.create({ model: 'all-MiniLM-L6-v2', input: 'x', dimensions: 128 }),
    ).rejects.toMatchObject({ status: 400 });
  });

  it('transcribes a WAV file the test writes, as json, text and verbose_json with the measured duration', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'svc-wav-'));
    try {
      const path = join(dir, 'speech.wav');
      await writeFile(path, createSineWav({ seconds: 2.5 }));
      const { data: verbose, response } = await client.audio.transcriptions
        .create({
          file: createReadStream(path),
          model: 'whisper-base',
          response_format: 'verbose_json',
          language: 'en',
        })
        .withResponse();
      expect(verbose.duration).toBe(2.5);
      expect(verbose.language).toBe('en');
      expect(verbose.text).toBe('transcribed 80044 bytes of audio');
      expect(verbose.segments?.[0]).toMatchObject({ start: 0, end: 2.5, text: 'transcribed 80044 bytes of audio' });
      const json = await client.audio.transcriptions.create({ file: createReadStream(path), model: 'whisper-base' });
      expect(json).toEqual({ text: 'transcribed 80044 bytes of audio' });
      const text = await client.audio.transcriptions.create({
        file: createReadStream(path),
        model: 'whisper-base',
        response_format: 'text',
      });
      expect(String(text).trim()).toBe('transcribed 80044 bytes of audio');
      // Billed per second: ceil(2.5) = 3 s at 0.006 CAD/min = 300 micro-CAD each.
      const requestId = response.headers.get('x-svc-completion-id') ?? '';
      expect(requestId).toMatch(/^tr-/);
      const [receipt] = await receiptsOf(requestId);
      expect(receipt).toMatchObject({
        id: response.headers.get('x-svc-receipt'),
        metering_units: 3,
        metadata: { request_type: 'transcription', model: 'whisper-base' },
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('refuses audio it does not recognise by content with 415, whatever the file name says', async () => {
    const form = new FormData();
    form.set('file', new Blob([Buffer.from('this is not audio at all')], { type: 'audio/wav' }), 'fake.wav');
    form.set('model', 'whisper-base');
    const res = await fetch(`${f.server.url}/v1/audio/transcriptions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${f.buyer.apiKey}` },
      body: form,
    });
    expect(res.status).toBe(415);
    expect(await res.json()).toMatchObject({
      error: { code: 'unsupported_media_type', type: 'invalid_request_error' },
    });
  });

  it('generates images behind presigned URLs that download PNGs; an altered or expired URL fails', async () => {
    const { data: images, response } = await client.images
      .generate({ model: 'sdxl-turbo', prompt: 'a red fox', n: 2, size: '256x256' })
      .withResponse();
    expect(images.data).toHaveLength(2);
    expect(response.headers.get('x-svc-node')).toBe(node.nodeId);
    const url = new URL(images.data?.[0]?.url ?? '');
    expect(url.origin).toBe(f.server.url);
    expect(Number(url.searchParams.get('expires'))).toBeGreaterThan(Date.now() / 1000 + 3500);
    const png = await fetch(url);
    expect(png.status).toBe(200);
    expect(png.headers.get('content-type')).toBe('image/png');
    expect(
      Buffer.from(await png.arrayBuffer())
        .subarray(0, 8)
        .equals(PNG_SIGNATURE),
    ).toBe(true);

    const altered = new URL(url);
    altered.searchParams.set('expires', String(Number(url.searchParams.get('expires')) + 60));
    expect((await fetch(altered)).status).toBe(403);
    const otherFile = new URL(url.toString().replace('-0.png', '-1.png'));
    expect((await fetch(otherFile)).status).toBe(403);
    const name = decodeURIComponent(url.pathname.split('/').pop() ?? '');
    const expired = presignFileUrl(f.server.ctx, name, Math.floor(Date.now() / 1000) - 1);
    const res = await fetch(expired);
    expect(res.status).toBe(403);
    expect(await res.json()).toMatchObject({
      error: { code: 'forbidden', type: 'permission_error', message: 'this file URL has expired' },
    });
    expect((await fetch(presignFileUrl(f.server.ctx, 'img-missing-0.png'))).status).toBe(404);
    // 0.03 CAD per image: the receipt meters 2 images.
    const [receipt] = await receiptsOf((images as unknown as { id: string }).id);
    expect(receipt?.metering_units).toBe(2);
  });

  it('bills the catalogue price of what the receipt meters and releases the rest of the hold', async () => {
    const before = await balance();
    await client.images.generate({ model: 'sdxl-turbo', prompt: 'three cents', size: '64x64' });
    expect(before - (await balance())).toBe(3);
    const { held_cents } = (await f.api('GET', '/api/v1/billing/balance')).json as { held_cents: number };
    expect(held_cents).toBe(0);
  });

  it("surfaces the SDK's typed errors: 401, 403 (read-only key), 404 (knowledge base), 503 (no node in the pinned country), 400", async () => {
    await expect(f.openai('svc_live_notakey_0000').models.list()).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
    const readOnly = await createKey(f.server.app, f.buyer, ['read-only'], 'read-only');
    expect((await f.openai(readOnly).models.list()).data.length).toBe(7);
    const denied = await f
      .openai(readOnly)
      .chat.completions.create({ model: 'tinyllama', messages: [{ role: 'user', content: 'hi' }] })
      .catch((e: unknown) => e);
    expect(denied).toBeInstanceOf(OpenAI.PermissionDeniedError);
    const kb = await client.chat.completions
      .create({
        model: 'tinyllama',
        messages: [{ role: 'user', content: 'hi' }],
        knowledge_base: 'kb_123',
      } as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming)
      .catch((e: unknown) => e);
    // Under /v1/ errors use OpenAI's envelope (DESIGN.md section 5): the SDK reads our code and message.
    expect(kb).toBeInstanceOf(OpenAI.NotFoundError);
    expect(kb).toMatchObject({
      status: 404,
      code: 'not_found',
      type: 'invalid_request_error',
      message: '404 knowledge base kb_123 not found',
    });
    const raw = await f.api('POST', '/v1/chat/completions', {
      model: 'tinyllama',
      messages: [{ role: 'user', content: 'hi' }],
      knowledge_base: 'kb_123',
    });
    expect(raw.json).toEqual({
      error: {
        message: 'knowledge base kb_123 not found',
        type: 'invalid_request_error',
        param: null,
        code: 'not_found',
      },
    });
    const pinned = await client.chat.completions
      .create({
        model: 'tinyllama',
        messages: [{ role: 'user', content: 'hi' }],
        strict_jurisdiction: 'DE',
      } as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming)
      .catch((e: unknown) => e);
    expect(pinned).toBeInstanceOf(OpenAI.InternalServerError);
    expect(pinned).toMatchObject({
      status: 503,
      code: 'no_capacity',
      type: 'api_error',
      message: '503 no live node serves tinyllama in DE',
    });
    const invalid = await client.chat.completions
      .create({ model: 'tinyllama', messages: [{ role: 'user', content: 'hi' }], temperature: 3 })
      .catch((e: unknown) => e);
    expect(invalid).toBeInstanceOf(OpenAI.BadRequestError);
  });

  it('keeps another organization out of a completion receipt (404)', async () => {
    const done = await client.chat.completions.create({
      model: 'tinyllama',
      messages: [{ role: 'user', content: 'mine' }],
    });
    const stranger = await signUp(f.server.app);
    expect((await f.api('GET', `/api/v1/job/receipts/${done.id}`, undefined, stranger.apiKey)).status).toBe(404);
  });
});

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fetchPayload, runJob, STREAMING_UNSUPPORTED, type RunContext, type WorkItem } from '../src/index.js';
import { createFakeEngine } from './fake-engine.js';

const engine = createFakeEngine({
  name: 'fake-all',
  models: ['all-MiniLM-L6-v2', 'whisper-base', 'sdxl-turbo', 'tinyllama'],
});
const ctx: RunContext = {
  engines: new Map(engine.models().map((m) => [m, engine])),
  dataDir: '/nonexistent',
  allowProcessRunner: false,
  signal: new AbortController().signal,
};
const work = (fields: Partial<WorkItem>): WorkItem => ({
  work_id: 'wrk_r',
  job_id: 'job_r',
  type: 'job',
  payload: {},
  stream: false,
  kind: 0,
  model: null,
  lease_expires_at: new Date(Date.now() + 60_000).toISOString(),
  ...fields,
});
const json = (bytes: Buffer): unknown => JSON.parse(bytes.toString('utf8'));

describe('engine job runners', () => {
  let server: Server;
  let origin: string;
  beforeAll(async () => {
    server = createServer((req, res) => {
      if (req.url === '/audio.wav') res.end(Buffer.alloc(1000, 1));
      else if (req.url === '/big') res.end(Buffer.alloc(5000, 1));
      else res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('kind 2 embeds all inputs in one call; units are the input tokens', async () => {
    const out = await runJob(work({ kind: 2, model: 'all-MiniLM-L6-v2', payload: { inputs: ['ab', 'cde'] } }), ctx);
    expect(json(out.bytes)).toEqual({
      data: [
        { index: 0, embedding: [2, 0] },
        { index: 1, embedding: [3, 1] },
      ],
    });
    expect(out).toMatchObject({ metering_units: 4, usage: { prompt_tokens: 4 }, engine: 'fake-all' });
  });

  it('kind 3 fetches payload_url from the control plane and meters ceil(duration)', async () => {
    const out = await runJob(
      work({ kind: 3, model: 'whisper-base', payload: { payload_url: `${origin}/audio.wav` } }),
      { ...ctx, trustedOrigin: origin },
    );
    expect(json(out.bytes)).toEqual({ text: 'heard 1000 bytes', language: 'en', duration: 2.3, segments: [] });
    expect(out).toMatchObject({ metering_units: 3, usage: { audio_seconds: 3 } });
  });

  it('kind 3 refuses private addresses that are not the control plane, oversize and failing downloads', async () => {
    const item = work({ kind: 3, model: 'whisper-base', payload: { payload_url: `${origin}/audio.wav` } });
    await expect(runJob(item, ctx)).rejects.toMatchObject({
      retryable: false,
      message: expect.stringContaining('not a public address'),
    });
    const signal = new AbortController().signal;
    await expect(
      fetchPayload(`${origin}/big`, { signal, trustedOrigin: origin, maxBytes: 4096 }),
    ).rejects.toMatchObject({ message: 'payload_url is larger than 4096 bytes' });
    await expect(fetchPayload(`${origin}/missing`, { signal, trustedOrigin: origin })).rejects.toMatchObject({
      message: 'payload_url answered HTTP 404',
      retryable: false,
    });
    await expect(fetchPayload('file:///etc/passwd', { signal })).rejects.toMatchObject({
      message: 'payload.payload_url must be http(s)',
    });
    await expect(fetchPayload('http://[::1]:65535/x', { signal })).rejects.toMatchObject({
      message: expect.stringContaining('not a public address'),
    });
    await expect(fetchPayload('http://169.254.169.254/latest/meta-data', { signal })).rejects.toMatchObject({
      message: expect.stringContaining('not a public address'),
    });
  });

  it('refuses every IPv6 form that embeds a private IPv4 address, judged at connect time; nothing reaches the host', async () => {
    let hits = 0;
    const local = createServer((_req, res) => {
      hits++;
      res.end('secret');
    });
    await new Promise<void>((resolve) => local.listen(0, '::', resolve));
    const port = (local.address() as AddressInfo).port;
    const signal = new AbortController().signal;
    try {
      for (const host of [
        '[::ffff:127.0.0.1]',
        '[::ffff:7f00:1]',
        '[::127.0.0.1]',
        '[fec0::1]',
        '[64:ff9b::7f00:1]',
        '[64:ff9b:1:7f00:1::]',
        '[2002:7f00:1::]',
        '[2001:0:4136:e378:8000:63bf:80ff:fffe]', // Teredo, client 127.0.0.1
        '[::]',
        'localhost',
        '0.0.0.0',
      ]) {
        await expect(fetchPayload(`http://${host}:${port}/metrics`, { signal }), host).rejects.toMatchObject({
          retryable: false,
          message: expect.stringContaining('is not a public address'),
        });
      }
      expect(hits).toBe(0);
      // The control plane's own origin stays reachable (its presigned URLs may be on a private network).
      const trustedOrigin = `http://[::ffff:127.0.0.1]:${port}`;
      expect((await fetchPayload(`${trustedOrigin}/x`, { signal, trustedOrigin })).toString()).toBe('secret');
      expect(hits).toBe(1);
    } finally {
      await new Promise<void>((resolve) => local.close(() => resolve()));
    }
  });

  it('kind 4 makes one image per prompt as base64; units are images', async () => {
    const out = await runJob(
      work({ kind: 4, model: 'sdxl-turbo', payload: { prompts: ['a cat', 'a dog'], size: '256x256' } }),
      ctx,
    );
    const image = { content_type: 'image/png', b64_json: Buffer.from('89504e470d0a1a0a', 'hex').toString('base64') };
    expect(json(out.bytes)).toEqual({
      results: [
        { index: 0, images: [image] },
        { index: 1, images: [image] },
      ],
    });
    expect(out.metering_units).toBe(2);
    await expect(
      runJob(work({ kind: 4, model: 'sdxl-turbo', payload: { prompts: ['x'], size: 'huge' } }), ctx),
    ).rejects.toMatchObject({ retryable: false });
  });

  it('gateway chat and embeddings run on the engines; streaming and other types are refused clearly', async () => {
    const chat = await runJob(
      work({
        type: 'chat',
        job_id: 'chatcmpl-1',
        model: 'tinyllama',
        payload: {
          messages: [
            { role: 'system', content: 's' },
            { role: 'user', content: 'hi you' },
          ],
          max_tokens: 5,
        },
      }),
      ctx,
    );
    expect(json(chat.bytes)).toEqual({
      content: 'echo:hi you',
      finish_reason: 'stop',
      usage: { prompt_tokens: 2, completion_tokens: 3 },
    });
    expect(chat.metering_units).toBe(5);
    const emb = await runJob(work({ type: 'embeddings', model: 'all-MiniLM-L6-v2', payload: { input: 'abc' } }), ctx);
    expect(json(emb.bytes)).toEqual({ data: [{ index: 0, embedding: [3, 0] }], usage: { prompt_tokens: 2 } });
    await expect(
      runJob(
        work({
          type: 'chat',
          model: 'tinyllama',
          stream: true,
          payload: { messages: [{ role: 'user', content: 'x' }] },
        }),
        ctx,
      ),
    ).rejects.toMatchObject({
      message: STREAMING_UNSUPPORTED,
      retryable: false,
    });
    await expect(runJob(work({ type: 'video', model: 'sdxl-turbo' }), ctx)).rejects.toMatchObject({
      message: 'gateway work of type video is not supported by this agent version',
    });
    await expect(runJob(work({ kind: 8 }), ctx)).rejects.toMatchObject({
      message:
        'this node has no program for kind 8 (scene_reconstruction): its operator did not start it with --runner 8=CMD',
      retryable: false,
    });
    await expect(runJob(work({ kind: 11 }), ctx)).rejects.toMatchObject({
      message: 'job kind 11 is not supported by this agent version',
      retryable: false,
    });
    await expect(
      runJob(
        work({ type: 'chat', model: 'tinyllama', payload: { messages: [{ role: 'wizard', content: 'x' }] } }),
        ctx,
      ),
    ).rejects.toMatchObject({ retryable: false });
  });
});

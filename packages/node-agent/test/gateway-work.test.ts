import { existsSync, watch } from 'node:fs';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  createOpenAIUpstreamEngine,
  outboxWorkIds,
  runJob,
  STREAMING_UNSUPPORTED,
  type RunContext,
  type WorkItem,
} from '../src/index.js';
import { startFakeControlPlane, type FakeControlPlane, type FakeWork } from './fake-control-plane.js';
import { createFakeEngine } from './fake-engine.js';
import { cleanupAgents, makeAgent } from './helpers.js';
import { startOpenAITestServer, type OpenAITestServer } from './openai-test-server.js';

const streamedChat = (n: number, content: string, extra: Partial<FakeWork> = {}): FakeWork => ({
  work_id: `wrk_${n}`,
  job_id: `chatcmpl-${n}`,
  type: 'chat',
  model: 'tinyllama',
  stream: true,
  payload: { model: 'tinyllama', messages: [{ role: 'user', content }], stream: true },
  ...extra,
});

describe('gateway chat on the agent', () => {
  let cp: FakeControlPlane;
  let upstream: OpenAITestServer;
  beforeEach(async () => {
    cp = await startFakeControlPlane();
    upstream = await startOpenAITestServer();
  });
  afterEach(async () => {
    await cleanupAgents();
    await cp.close();
    await upstream.close();
  });

  const engines = () => {
    const engine = createOpenAIUpstreamEngine({ baseUrl: upstream.url, models: new Map([['tinyllama', 'tinyllama']]) });
    return new Map([['tinyllama', engine]]);
  };

  it('posts the deltas as signed NDJSON batches (the first at once), then done with the usage, then the whole result and its receipt', async () => {
    const t = await makeAgent(cp, { engines: engines() });
    await t.agent.start();
    const words = Array.from({ length: 60 }, (_, i) => `w${i}`).join(' ');
    cp.enqueue(streamedChat(1, words));
    await cp.waitFor(() => cp.receipts.has('wrk_1'));
    const events = cp.events.get('wrk_1') ?? [];
    const deltas = events.filter((e) => e.type === 'delta').map((e) => String(e.content));
    expect(deltas.join('')).toBe(`You said: ${words}`);
    expect(events.at(-1)).toEqual({
      type: 'done',
      usage: { prompt_tokens: 60, completion_tokens: 62 },
      finish_reason: 'stop',
    });
    const batches = cp.eventBatches.get('wrk_1') ?? [];
    expect(batches[0]).toBe(1);
    expect(batches.length).toBeLessThan(events.length);
    expect(Math.max(...batches)).toBeLessThanOrEqual(17);
    const result = JSON.parse(cp.results.get('wrk_1')?.output.toString('utf8') ?? '{}');
    expect(result).toEqual({
      content: `You said: ${words}`,
      finish_reason: 'stop',
      usage: { prompt_tokens: 60, completion_tokens: 62 },
    });
    expect(cp.receipts.get('wrk_1')).toMatchObject({ job_id: 'chatcmpl-1', metering_units: 122 });
    expect(
      cp.calls('events').every((r) => r.status === 200 && r.headers['content-type'] === 'application/x-ndjson'),
    ).toBe(true);
  });

  it('stops when an events answer says cancel: nothing is uploaded', async () => {
    const t = await makeAgent(cp, { engines: engines() });
    await t.agent.start();
    cp.cancel('wrk_2');
    cp.enqueue(streamedChat(2, Array.from({ length: 3000 }, () => 'word').join(' ')));
    await cp.waitFor(() => t.workEvents().some((e) => e.work_id === 'wrk_2'));
    expect(t.workEvents().find((e) => e.work_id === 'wrk_2')).toMatchObject({ outcome: 'cancelled' });
    expect(cp.results.has('wrk_2')).toBe(false);
    expect(cp.fails.has('wrk_2')).toBe(false);
    expect((cp.events.get('wrk_2') ?? []).length).toBeLessThan(3000);
  });

  it('heartbeats every streamHeartbeatMs while a stream runs', async () => {
    const t = await makeAgent(cp, { engines: engines(), timing: { heartbeatMs: 60_000, streamHeartbeatMs: 50 } });
    await t.agent.start();
    upstream.setDelay(600);
    cp.enqueue(streamedChat(3, 'slow start'));
    await cp.waitFor(() => cp.receipts.has('wrk_3'));
    const during = cp.heartbeats.filter((h) => h.active_work.includes('wrk_3'));
    expect(during.length).toBeGreaterThanOrEqual(5);
  });

  it('sends an error event before reporting a failure mid-stream', async () => {
    const t = await makeAgent(cp, { engines: engines() });
    await t.agent.start();
    upstream.setFailure({ dropAfterChunks: 4 });
    cp.enqueue(streamedChat(4, 'a b c d e f g h'));
    await cp.waitFor(() => cp.fails.has('wrk_4'));
    const events = cp.events.get('wrk_4') ?? [];
    expect(
      events
        .filter((e) => e.type === 'delta')
        .map((e) => e.content)
        .join(''),
    ).toBe('You said: a');
    expect(events.at(-1)).toMatchObject({ type: 'error', retryable: true });
    expect(String(events.at(-1)?.message)).toMatch(/^upstream connection lost mid-stream/);
    expect(cp.fails.get('wrk_4')).toMatchObject({ retryable: true });
    expect(cp.results.has('wrk_4')).toBe(false);
  });

  it('sends the result inside the receipt call, keeps the signed receipt in the outbox until it is answered, and jobs use two calls', async () => {
    const t = await makeAgent(cp, { engines: engines() });
    const written: string[] = [];
    const watcher = watch(t.dataDir, { recursive: true }, (_, name) => name && written.push(String(name)));
    try {
      await t.agent.start();
      cp.enqueue(
        streamedChat(5, 'plain answer', {
          stream: false,
          payload: { model: 'tinyllama', messages: [{ role: 'user', content: 'plain answer' }] },
        }),
      );
      await cp.waitFor(() => t.workEvents().some((e) => e.work_id === 'wrk_5'));
      expect(cp.calls('result')).toHaveLength(0);
      expect(cp.calls('receipt')).toHaveLength(1);
      const receipt = cp.receipts.get('wrk_5') as {
        result?: { output: string; result_hash: string };
        result_hash: string;
      };
      expect(receipt.result?.result_hash).toBe(receipt.result_hash);
      expect(JSON.parse(receipt.result?.output ?? '{}')).toMatchObject({ content: 'You said: plain answer' });
      expect(t.workEvents().find((e) => e.work_id === 'wrk_5')).toMatchObject({ outcome: 'completed' });
      // Kept until the server answered the receipt (a kill -9 before then leaves it to send again), then removed.
      // (Gateway work: a line of the outbox journal, then its tombstone; a restart sends nothing.)
      expect(written.some((name) => /^outbox.journal-/.test(name))).toBe(true);
      expect(existsSync(join(t.dataDir, 'outbox', 'wrk_5.json'))).toBe(false);
      expect(outboxWorkIds(t.dataDir)).toEqual([]);
      // A marketplace job still goes through the outbox, in two calls.
      cp.enqueue({
        work_id: 'wrk_6',
        job_id: 'job_6',
        type: 'job',
        kind: 1,
        model: 'tinyllama',
        payload: { model: 'tinyllama', inputs: ['a job'], max_tokens: 8 },
      });
      await cp.waitFor(() => t.workEvents().some((e) => e.work_id === 'wrk_6'));
      expect(cp.calls('result')).toHaveLength(1);
      expect(written.some((name) => name.startsWith('outbox') && name.includes('wrk_6'))).toBe(true);
    } finally {
      watcher.close();
    }
  });
});

describe('gateway transcription and image work', () => {
  const engine = createFakeEngine({ models: ['whisper-base', 'sdxl-turbo', 'tinyllama'] });
  const ctx: RunContext = {
    engines: new Map(engine.models().map((m) => [m, engine])),
    dataDir: '/nonexistent',
    allowProcessRunner: false,
    signal: new AbortController().signal,
  };
  const work = (fields: Partial<WorkItem>): WorkItem => ({
    work_id: 'wrk_g',
    job_id: 'tr-1',
    type: 'transcription',
    payload: {},
    stream: false,
    kind: 0,
    model: null,
    lease_expires_at: new Date(Date.now() + 60_000).toISOString(),
    ...fields,
  });

  it('transcribes inline base64 audio; units are ceil(duration)', async () => {
    const out = await runJob(
      work({
        model: 'whisper-base',
        payload: { audio_base64: Buffer.alloc(1234, 7).toString('base64'), filename: 'audio.wav', language: 'en' },
      }),
      ctx,
    );
    expect(JSON.parse(out.bytes.toString('utf8'))).toEqual({
      text: 'heard 1234 bytes',
      language: 'en',
      duration: 2.3,
      segments: [],
    });
    expect(out).toMatchObject({ metering_units: 3, usage: { audio_seconds: 3 } });
    await expect(runJob(work({ model: 'whisper-base', payload: {} }), ctx)).rejects.toMatchObject({ retryable: false });
  });

  it('generates images; units are the images made', async () => {
    const out = await runJob(
      work({ type: 'image', model: 'sdxl-turbo', payload: { prompt: 'fox', n: 1, size: '64x64' } }),
      ctx,
    );
    expect(JSON.parse(out.bytes.toString('utf8'))).toEqual({
      images: [{ content_type: 'image/png', b64_json: Buffer.from('89504e470d0a1a0a', 'hex').toString('base64') }],
    });
    expect(out).toMatchObject({ metering_units: 1, usage: { images: 1 } });
    await expect(
      runJob(work({ type: 'image', model: 'sdxl-turbo', payload: { prompt: 'fox', n: 11 } }), ctx),
    ).rejects.toMatchObject({ retryable: false });
  });

  it('refuses streamed work when there is nowhere to send events', async () => {
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
    ).rejects.toMatchObject({ message: STREAMING_UNSUPPORTED });
  });
});

import { sha256Hex } from '@svc/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { audioSamples, PNG_BYTES, type AudioSample } from '../../../test/audio-samples.js';
import {
  bearer,
  createKey,
  createTestApp,
  createTestNode,
  signUp,
  watchPolls,
  type TestApp,
  type TestBuyer,
  type TestNode,
  type WorkItem,
} from '../../../test/harness.js';

/**
 * Transcriptions are measured and billed by the server (DESIGN.md section 10, issue 41 point 5):
 * one real file per accepted format, a node driven by hand with signed receipts, honest or not.
 */
describe('transcription audio measured by the server', () => {
  let t: TestApp;
  let buyer: TestBuyer;
  let node: TestNode;
  let polls: ReturnType<typeof watchPolls>;

  beforeAll(async () => {
    t = await createTestApp();
    buyer = await signUp(t.app);
    const operator = await createKey(t.app, await signUp(t.app), ['operator']);
    node = await createTestNode(t.app, operator, { models: ['whisper-base'] });
    polls = watchPolls(t.ctx);
  });
  afterAll(() => t.close());

  async function upload(bytes: Buffer, name: string) {
    const form = new FormData();
    form.set('model', 'whisper-base');
    form.set('response_format', 'verbose_json');
    form.set('file', new Blob([bytes]), name);
    const encoded = new Response(form);
    return t.app.inject({
      method: 'POST',
      url: '/v1/audio/transcriptions',
      headers: { ...bearer(buyer.apiKey), 'content-type': encoded.headers.get('content-type') ?? '' },
      payload: Buffer.from(await encoded.arrayBuffer()),
    });
  }

  /** Uploads `sample` and hands its work item to the test, the client's answer still pending. */
  async function started(sample: AudioSample) {
    const before = polls.waiting();
    const polled = node.poll({ waitMs: 10_000 });
    await polls.until(before + 1);
    const answer = upload(sample.bytes, `speech.${sample.format}`);
    const [work] = await polled;
    if (!work) throw new Error('no work reached the node');
    return { work, answer };
  }

  /** The node's signed receipt with its result inline, reporting `units` audio seconds and `duration`. */
  function receipt(work: WorkItem, units: number, duration: number) {
    const output = JSON.stringify({ text: 'a tone', language: 'en', duration, segments: [] });
    const result_hash = sha256Hex(output);
    return node.receipt(work, {
      result_hash,
      metering_units: units,
      result: {
        output,
        encoding: 'utf8',
        content_type: 'application/json',
        result_hash,
        metering_units: units,
        usage: { audio_seconds: units },
      },
    });
  }

  const stateOf = async (requestId: string) =>
    (
      await t.ctx.db.query<{ status: string; charged_micro: number | null; usage: unknown; receipts: number }>(
        `SELECT status, charged_micro, usage,
                (SELECT count(*)::int FROM receipts WHERE job_id = $1) AS receipts
           FROM gateway_requests WHERE id = $1`,
        [requestId],
      )
    ).rows[0];

  it('answers and bills the duration it measured in every format, whatever the node reports', async () => {
    const seen = [];
    for (const sample of audioSamples()) {
      const { work, answer } = await started(sample);
      expect(work.payload).toMatchObject({ format: sample.format, filename: `audio.${sample.format}` });
      // Billed seconds of the file as it truly is; the node reports one more (within 1 s) and a duration of its own.
      const billed = Math.ceil(sample.seconds + 0.1);
      expect((await receipt(work, billed + 1, sample.seconds + 0.9)).statusCode).toBe(200);
      const res = await answer;
      expect(res.statusCode).toBe(200);
      const body = res.json() as { duration: number };
      const state = await stateOf(work.job_id);
      seen.push({
        format: sample.format,
        duration_close: Math.abs(body.duration - sample.seconds) <= 0.1,
        charged_micro: state?.charged_micro,
        usage: state?.usage,
      });
    }
    // 0.006 CAD a minute = 100 micro-CAD a started second, of the server's measurement.
    expect(seen).toEqual([
      { format: 'wav', duration_close: true, charged_micro: 300, usage: { audio_seconds: 3 } },
      { format: 'mp3', duration_close: true, charged_micro: 400, usage: { audio_seconds: 4 } },
      { format: 'flac', duration_close: true, charged_micro: 500, usage: { audio_seconds: 5 } },
      { format: 'ogg', duration_close: true, charged_micro: 600, usage: { audio_seconds: 6 } },
      { format: 'm4a', duration_close: true, charged_micro: 700, usage: { audio_seconds: 7 } },
      { format: 'webm', duration_close: true, charged_micro: 800, usage: { audio_seconds: 8 } },
    ]);
  });

  it("refuses a lying node's receipt 5 s off the measured audio, charging nothing", async () => {
    const webm = audioSamples().find((s) => s.format === 'webm');
    if (!webm) throw new Error('no webm sample');
    // 7.608 s of audio: a receipt for 3 s is refused, the honest 8 s is then taken and charged.
    const { work, answer } = await started(webm);
    const under = await receipt(work, 3, 3);
    expect(under.statusCode).toBe(400);
    expect(under.json()).toMatchObject({ error: 'invalid_request', details: [{ path: '/metering_units' }] });
    expect(await stateOf(work.job_id)).toMatchObject({ status: 'running', charged_micro: null, receipts: 0 });
    expect((await receipt(work, 8, 7.608)).statusCode).toBe(200);
    expect((await answer).statusCode).toBe(200);
    expect(await stateOf(work.job_id)).toMatchObject({ status: 'completed', charged_micro: 800, receipts: 1 });

    // 2.5 s of audio: a receipt for 8 s is refused; nothing of it is stored or charged.
    const wav = audioSamples().find((s) => s.format === 'wav');
    if (!wav) throw new Error('no wav sample');
    const over = await started(wav);
    const lie = await receipt(over.work, 8, 8);
    expect(lie.statusCode).toBe(400);
    expect(lie.json()).toMatchObject({ error: 'invalid_request', details: [{ path: '/metering_units' }] });
    expect(await stateOf(over.work.job_id)).toMatchObject({ charged_micro: null, receipts: 0 });
    // Settle the client's request whichever way the refusal left it (ended, or still open for an honest receipt).
    await receipt(over.work, 3, 2.5);
    await over.answer;
  });

  it("answers a PNG with 415 in OpenAI's envelope", async () => {
    const res = await upload(PNG_BYTES, 'speech.mp3');
    expect(res.statusCode).toBe(415);
    expect(res.json()).toMatchObject({
      error: { code: 'unsupported_media_type', type: 'invalid_request_error', param: 'file' },
    });
  });
});

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { audioSamples, PNG_BYTES } from '../../../test/audio-samples.js';
import {
  bearer,
  createKey,
  createTestApp,
  createTestNode,
  signUp,
  type TestApp,
  type TestBuyer,
} from '../../../test/harness.js';

/** Kind 3 jobs: the audio measured by the server at submission, billed, and the node's receipt held to it. */
describe('a transcription job measured by the server', () => {
  let t: TestApp;
  let buyer: TestBuyer;
  let server: Server;
  let origin = '';

  beforeAll(async () => {
    const webm = audioSamples().find((s) => s.format === 'webm');
    server = createServer((req, res) => res.end(req.url === '/tone.webm' ? webm?.bytes : PNG_BYTES));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    t = await createTestApp();
    buyer = await signUp(t.app);
  });
  afterAll(async () => {
    await t.close();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  const submit = (path: string) =>
    t.app.inject({
      method: 'POST',
      url: '/api/v1/marketplace/jobs',
      headers: bearer(buyer.apiKey),
      payload: { kind: 3, payload_url: `${origin}${path}`, budget: 1, max_price_per_unit: 0.001, currency: 'CAD' },
    });

  it('refuses a PNG with 415 and nothing held', async () => {
    const res = await submit('/image.png');
    expect(res.statusCode).toBe(415);
    expect(res.json()).toMatchObject({ error: 'unsupported_media_type', details: [{ path: '/payload_url' }] });
  });

  it('estimates and bills the measured 7.608 s, refusing a receipt 5 s off', async () => {
    const node = await createTestNode(t.app, await createKey(t.app, await signUp(t.app), ['operator']), {
      models: ['whisper-base'],
    });
    const submitted = await submit('/tone.webm');
    expect(submitted.statusCode).toBe(201);
    // 8 started seconds at 0.0001 CAD each.
    expect(submitted.json().estimated_cost).toBe(0.0008);
    const [work] = await node.poll({ waitMs: 2_000 });
    if (!work) throw new Error('no work');
    const output = JSON.stringify({ text: 'a tone', language: 'en', duration: 7.6, segments: [] });
    const lie = await node.complete(work, output, 3);
    expect(lie.statusCode).toBe(400);
    expect(lie.json()).toMatchObject({ details: [{ path: '/metering_units' }] });
    // One second over is within the tolerance; the charge is the server's 8 s all the same.
    const honest = await node.complete(work, output, 9);
    expect(honest.statusCode).toBe(200);
    const job = await t.app.inject({
      method: 'GET',
      url: `/api/v1/marketplace/jobs/${submitted.json().job_id}`,
      headers: bearer(buyer.apiKey),
    });
    expect(job.json()).toMatchObject({ status: 'completed', charged_micro: 800 });
  });
});

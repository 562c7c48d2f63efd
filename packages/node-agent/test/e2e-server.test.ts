import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifySvc1 } from '@svc/protocol';
import { bearer, createKey, signUp, startTestServer, type TestBuyer } from '@svc/server/testing';
import { createFakeEngine } from './fake-engine.js';
import { cleanupAgents, makeAgent } from './helpers.js';

type Server = Awaited<ReturnType<typeof startTestServer>>;

describe('the agent against the real server', () => {
  let server: Server;
  let buyer: TestBuyer;
  let operatorKey: string;
  const api = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${server.url}${path}`, {
      method,
      headers: { ...bearer(buyer.apiKey), ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    return { status: res.status, text, json: () => JSON.parse(text) as Record<string, unknown> };
  };
  beforeAll(async () => {
    server = await startTestServer();
    buyer = await signUp(server.app);
    operatorKey = await createKey(server.app, buyer, ['operator']);
  });
  afterAll(async () => {
    await cleanupAgents();
    await server.stop();
  });

  it('registers, then completes a kind 1 and a kind 5 job with receipts the server accepts', async () => {
    const engine = createFakeEngine({ models: ['tinyllama'] });
    const t = await makeAgent(
      { url: server.url, apiKey: operatorKey },
      { engines: new Map([['tinyllama', engine]]), allowProcessRunner: true },
    );
    const { node_id } = await t.agent.start();
    const submit = async (body: Record<string, unknown>) => {
      const res = await api('POST', '/api/v1/marketplace/jobs', { budget: 1, currency: 'CAD', ...body });
      expect(res.status, res.text).toBe(201);
      return String(res.json().job_id);
    };
    const llm = await submit({
      kind: 1,
      max_price_per_unit: 0.01,
      model: 'tinyllama',
      inline_text: 'hello world\nsecond',
    });
    const proc = await submit({
      kind: 5,
      max_price_per_unit: 0.0001,
      runner_args: [process.execPath, '-e', 'console.log(42)'],
      timeout_seconds: 10,
    });
    const finished = (j: Record<string, unknown>) => ['completed', 'failed', 'cancelled'].includes(String(j.status));
    let jobs: Record<string, unknown>[] = [];
    for (const deadline = Date.now() + 20_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 100))) {
      jobs = await Promise.all(
        [llm, proc].map(async (id) => (await api('GET', `/api/v1/marketplace/jobs/${id}`)).json()),
      );
      if (jobs.every(finished)) break;
    }
    expect(jobs.map((j) => [j.status, j.node_id])).toEqual([
      ['completed', node_id],
      ['completed', node_id],
    ]);
    expect(engine.calls).toEqual(['chat:hello world', 'chat:second']);

    const result = await api('GET', `/api/v1/marketplace/jobs/${proc}/result`);
    expect(result.status).toBe(200);
    expect(JSON.parse(result.text)).toMatchObject({ exit_code: 0, stdout: '42\n', timed_out: false });
    expect(createHash('sha256').update(result.text).digest('hex')).toBe(jobs[1]?.result_hash);
    const { receipts } = (await api('GET', `/api/v1/job/receipts/${proc}`)).json() as {
      receipts: Record<string, unknown>[];
    };
    const receipt = receipts[0] ?? {};
    expect(receipt).toMatchObject({
      job_id: proc,
      node_id,
      node_public_key: t.agent.publicKeyHex,
      signature_version: 'SVC1',
    });
    const fields = {
      job_id: proc,
      node_public_key_hex: String(receipt.node_public_key),
      result_hash_hex: String(receipt.result_hash),
      metering_units: Number(receipt.metering_units),
    };
    expect(verifySvc1(fields, String(receipt.signature))).toBe(true);
    // The agent logs after the server completed the job (receipt first, then the outbox cleanup).
    for (const deadline = Date.now() + 5_000; t.workEvents().length < 2 && Date.now() < deadline;)
      await new Promise((r) => setTimeout(r, 20));
    expect(t.workEvents().map((e) => e.outcome)).toEqual(['completed', 'completed']);
  });
});

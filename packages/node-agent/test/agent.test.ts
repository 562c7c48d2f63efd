import { createHash } from 'node:crypto';
import { svc1VerifiesIndependently } from '@svc/server/testing';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { EngineError, readNodeRecord } from '../src/index.js';
import { startFakeControlPlane, type FakeControlPlane, type FakeWork } from './fake-control-plane.js';
import { createFakeEngine } from './fake-engine.js';
import { cleanupAgents, makeAgent } from './helpers.js';

const llmJob = (n: number, inputs = ['hello there', 'second line here']): FakeWork => ({
  work_id: `wrk_${n}`,
  job_id: `job_${n}`,
  type: 'job',
  kind: 1,
  model: 'tinyllama',
  payload: { model: 'tinyllama', inputs, max_tokens: 16 },
});

describe('node agent against a fake control plane', () => {
  let cp: FakeControlPlane;
  beforeEach(async () => {
    cp = await startFakeControlPlane();
  });
  afterEach(async () => {
    await cleanupAgents();
    await cp.close();
  });

  it('registers its hardware and models, then runs a kind 1 job to a verified result and receipt', async () => {
    const engine = createFakeEngine({ models: ['tinyllama'] });
    const t = await makeAgent(cp, { engines: new Map([['tinyllama', engine]]), concurrency: 2, name: 'rig-1' });
    const registered = await t.agent.start();
    expect(await readNodeRecord(t.dataDir)).toEqual({ node_id: registered.node_id, server: cp.url });
    const node = cp.nodes.get(registered.node_id);
    expect(node?.body).toMatchObject({
      country: 'CA',
      region: 'ca-central',
      models: ['tinyllama'],
      max_concurrency: 2,
      name: 'rig-1',
      capabilities: ['cpu'],
    });
    expect(node?.body.cpu_cores).toBeGreaterThan(0);
    expect(node?.body.ram_bytes).toBeGreaterThan(0);

    cp.enqueue(llmJob(1));
    await cp.waitFor(() => cp.receipts.has('wrk_1'));
    const result = cp.results.get('wrk_1');
    if (result === undefined) throw new Error('no result');
    expect(createHash('sha256').update(result.output).digest('hex')).toBe(result.body.result_hash);
    expect(JSON.parse(result.output.toString())).toEqual({
      results: [
        {
          index: 0,
          content: 'echo:hello there',
          finish_reason: 'stop',
          usage: { prompt_tokens: 2, completion_tokens: 3 },
        },
        {
          index: 1,
          content: 'echo:second line here',
          finish_reason: 'stop',
          usage: { prompt_tokens: 3, completion_tokens: 3 },
        },
      ],
    });
    expect(result.body).toMatchObject({
      encoding: 'utf8',
      content_type: 'application/json',
      metering_units: 11,
      usage: { prompt_tokens: 5, completion_tokens: 6 },
    });
    const receipt = cp.receipts.get('wrk_1') ?? {};
    expect(receipt).toMatchObject({
      job_id: 'job_1',
      pubkey: t.agent.publicKeyHex,
      result_hash: result.body.result_hash,
      metering_units: 11,
    });
    expect(receipt.metadata).toMatchObject({
      model: 'tinyllama',
      engine: 'fake',
      country: 'CA',
      region: 'ca-central',
      duration_ms: expect.any(Number),
    });
    const ok = svc1VerifiesIndependently({
      job_id: String(receipt.job_id),
      node_public_key: String(receipt.pubkey),
      result_hash: String(receipt.result_hash),
      metering_units: Number(receipt.metering_units),
      signature: String(receipt.signature),
    });
    expect(ok).toBe(true);
    // A heartbeat listed the work while it ran, and the outbox is empty once delivered.
    expect(cp.heartbeats.some((h) => h.active_work.includes('wrk_1'))).toBe(true);
    await cp.waitFor(() => t.workEvents().length === 1);
    expect(t.workEvents()[0]).toMatchObject({ work_id: 'wrk_1', outcome: 'completed', metering_units: 11 });
    expect(await readdir(join(t.dataDir, 'outbox'))).toEqual([]);
  });

  it('retries an upload that got two 503s and delivers it once', async () => {
    const t = await makeAgent(cp, { engines: new Map([['tinyllama', createFakeEngine({ models: ['tinyllama'] })]]) });
    await t.agent.start();
    cp.failNext('result', [503, 503]);
    cp.enqueue(llmJob(2));
    await cp.waitFor(() => cp.receipts.has('wrk_2'));
    expect(cp.calls('result').map((r) => r.status)).toEqual([503, 503, 200]);
    const bodies = new Set(cp.calls('result').map((r) => r.body.toString()));
    expect(bodies.size).toBe(1);
    expect(cp.calls('receipt').map((r) => r.status)).toEqual([200]);
  });

  it('keeps polling after control-plane errors (backoff) and re-registers after a 401', async () => {
    const t = await makeAgent(cp, { engines: new Map([['tinyllama', createFakeEngine({ models: ['tinyllama'] })]]) });
    await t.agent.start();
    cp.failNext('work', [503, 500, 401]);
    cp.enqueue(llmJob(3));
    await cp.waitFor(() => cp.receipts.has('wrk_3'));
    expect(
      cp
        .calls('work')
        .slice(0, 3)
        .map((r) => r.status),
    ).toEqual([503, 500, 401]);
    expect(cp.calls('register').length).toBe(2);
    expect(
      t.events.filter((e) => e.event === 'warning' && e.message.startsWith('polling for work failed')).length,
    ).toBe(3);
  });

  it('reports a failed job with /fail, keeping the engine’s retryable flag', async () => {
    const engine = createFakeEngine({ models: ['tinyllama'], error: new EngineError('upstream said no', false) });
    const t = await makeAgent(cp, { engines: new Map([['tinyllama', engine]]) });
    await t.agent.start();
    cp.enqueue(
      llmJob(4),
      { ...llmJob(5), model: 'phi-4', payload: { inputs: ['x'] } },
      { work_id: 'wrk_6', job_id: 'job_6', type: 'job', kind: 5, payload: { runner_args: ['true'] } },
    );
    await cp.waitFor(() => cp.fails.size === 3);
    expect(cp.fails.get('wrk_4')).toEqual({ message: 'upstream said no', retryable: false });
    expect(cp.fails.get('wrk_5')).toEqual({ message: 'model phi-4 is not served by this node', retryable: false });
    expect(cp.fails.get('wrk_6')?.message).toMatch(/--allow-process-runner/);
    expect(cp.fails.get('wrk_6')?.retryable).toBe(false);
    expect(cp.results.size).toBe(0);
  });

  it('never runs more than `concurrency` items at once and never asks for more than its free slots', async () => {
    const engine = createFakeEngine({ models: ['tinyllama'], delayMs: 60 });
    const t = await makeAgent(cp, { engines: new Map([['tinyllama', engine]]), concurrency: 2 });
    await t.agent.start();
    cp.enqueue(...[10, 11, 12, 13, 14, 15].map((n) => llmJob(n, ['one input'])));
    await cp.waitFor(() => t.workEvents().length === 6);
    expect(cp.receipts.size).toBe(6);
    expect(engine.maxInFlight).toBe(2);
    expect(cp.polls.every((p) => p.max >= 1 && p.max <= 2)).toBe(true);
    expect(cp.polls.every((p) => p.wait_ms === 200)).toBe(true);
    expect(t.workEvents().map((e) => e.outcome)).toEqual(Array(6).fill('completed'));
  });

  it('aborts work the heartbeat answer cancels and never uploads a result for it', async () => {
    const engine = createFakeEngine({ models: ['tinyllama'], block: true });
    const t = await makeAgent(cp, { engines: new Map([['tinyllama', engine]]) });
    await t.agent.start();
    cp.enqueue(llmJob(20));
    await cp.waitFor(() => engine.inFlight === 1);
    cp.cancel('wrk_20');
    await cp.waitFor(() => t.workEvents().length === 1);
    expect(engine.aborted).toBe(1);
    expect(t.workEvents()[0]).toMatchObject({ work_id: 'wrk_20', outcome: 'cancelled' });
    // The slot is free again: the next job is taken (and blocks in turn).
    cp.enqueue(llmJob(21));
    await cp.waitFor(() => engine.inFlight === 1 && engine.calls.length === 2);
    // By the time its one slot took the next job, the cancelled work was over: nothing was uploaded for it.
    expect(cp.calls('result')).toEqual([]);
    expect(cp.calls('fail')).toEqual([]);
    expect(await readdir(join(t.dataDir, 'outbox')).catch(() => [])).toEqual([]);
  });

  it('stop() lets running work finish within the grace period', async () => {
    const engine = createFakeEngine({ models: ['tinyllama'], delayMs: 300 });
    const t = await makeAgent(cp, { engines: new Map([['tinyllama', engine]]) });
    const { node_id: stopped } = await t.agent.start();
    cp.enqueue(llmJob(30, ['a']));
    await cp.waitFor(() => engine.inFlight === 1);
    const polls = cp.polls.length;
    await t.agent.stop({ graceMs: 5_000 });
    expect(cp.receipts.has('wrk_30')).toBe(true);
    expect(cp.fails.size).toBe(0);
    expect(cp.polls.length).toBeLessThanOrEqual(polls + 1);
    const after = cp.requests.length;
    // A second agent on the same clocks: once it has sent three heartbeats, the stopped one has had
    // three heartbeat periods in which to send anything. It sent nothing (no heartbeats, no polls).
    const witness = await makeAgent(cp, {
      engines: new Map([['tinyllama', createFakeEngine({ models: ['tinyllama'] })]]),
    });
    const { node_id: watching } = await witness.agent.start();
    const since = () => cp.requests.slice(after);
    await cp.waitFor(
      () =>
        since().filter((r) => r.headers['x-svc-node'] === watching && r.path === '/api/v1/node/heartbeat').length >= 3,
    );
    expect(since().filter((r) => r.headers['x-svc-node'] === stopped)).toEqual([]);
    expect(since().filter((r) => r.headers['x-svc-node'] !== watching && r.path !== '/api/v1/node/register')).toEqual(
      [],
    );
  });

  it('stop() aborts work still running after the grace period and reports it retryable', async () => {
    const engine = createFakeEngine({ models: ['tinyllama'], block: true });
    const t = await makeAgent(cp, { engines: new Map([['tinyllama', engine]]) });
    await t.agent.start();
    cp.enqueue(llmJob(31));
    await cp.waitFor(() => engine.inFlight === 1);
    const started = Date.now();
    await t.agent.stop({ graceMs: 100 });
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(engine.aborted).toBe(1);
    expect(cp.fails.get('wrk_31')).toEqual({ message: 'the node shut down before the work finished', retryable: true });
    expect(cp.results.size).toBe(0);
    expect(t.workEvents()[0]).toMatchObject({ work_id: 'wrk_31', outcome: 'interrupted' });
  });
});

describe('the outbox', () => {
  let cp: FakeControlPlane;
  beforeEach(async () => {
    cp = await startFakeControlPlane();
  });
  afterEach(async () => {
    await cleanupAgents();
    await cp.close();
  });

  it('writes the signed result before uploading it', async () => {
    const t = await makeAgent(cp, { engines: new Map([['tinyllama', createFakeEngine({ models: ['tinyllama'] })]]) });
    await t.agent.start();
    // Failing long enough (about half a second of retries) that the file is read before the upload succeeds and removes it.
    cp.failNext('result', Array<number>(50).fill(503));
    cp.enqueue(llmJob(40));
    await cp.waitFor(() => cp.calls('result').length >= 1);
    const file = JSON.parse(await readFile(join(t.dataDir, 'outbox', 'wrk_40.json'), 'utf8')) as Record<
      string,
      unknown
    >;
    expect(Object.keys(file).sort()).toEqual([
      'content_type',
      'encoding',
      'job_id',
      'metering_units',
      'output',
      'receipt',
      'result_hash',
      'usage',
      'work_id',
    ]);
    expect(Object.keys(file.receipt as object).sort()).toEqual([
      'job_id',
      'metadata',
      'metering_units',
      'pubkey',
      'result_hash',
      'signature',
    ]);
    await cp.waitFor(() => cp.receipts.has('wrk_40'));
    expect(cp.results.get('wrk_40')?.body.output).toBe(file.output);
    expect(cp.receipts.get('wrk_40')?.signature).toBe((file.receipt as Record<string, unknown>).signature);
  });
});

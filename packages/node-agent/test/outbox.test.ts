import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { sha256Hex } from '@svc/protocol';
import {
  createNodeClient,
  createOutbox,
  jsonOutput,
  loadOrCreateIdentity,
  resultBody,
  sealResult,
  type OutboxEntry,
} from '../src/index.js';
import { startFakeControlPlane, type FakeControlPlane, type FakeWork } from './fake-control-plane.js';
import { cleanupAgents, makeAgent } from './helpers.js';

const item: FakeWork = {
  work_id: 'wrk_crash',
  job_id: 'job_crash',
  type: 'job',
  kind: 1,
  model: 'tinyllama',
  payload: { inputs: ['hi'] },
};

/** What a crashed agent leaves behind: a signed entry in the outbox of `dataDir`. */
async function crashedAgentDir(): Promise<{ dataDir: string; entry: OutboxEntry; pubkey: string }> {
  const dataDir = await mkdtemp(join(tmpdir(), 'svc-node-crash-'));
  const identity = await loadOrCreateIdentity(dataDir);
  const run = jsonOutput(
    {
      results: [
        { index: 0, content: 'hello', finish_reason: 'stop', usage: { prompt_tokens: 1, completion_tokens: 1 } },
      ],
    },
    {
      metering_units: 2,
      usage: { prompt_tokens: 1, completion_tokens: 1 },
      engine: 'fake',
    },
  );
  const entry = sealResult({
    item: { ...item, kind: 1, model: 'tinyllama', stream: false, lease_expires_at: new Date().toISOString() },
    run,
    identity,
    metadata: { model: 'tinyllama', engine: 'fake', duration_ms: 5 },
  });
  await createOutbox(dataDir).put(entry);
  return { dataDir, entry, pubkey: identity.publicKeyHex };
}

describe('outbox re-delivery after a crash', () => {
  let cp: FakeControlPlane;
  beforeEach(async () => {
    cp = await startFakeControlPlane();
  });
  afterEach(async () => {
    await cleanupAgents();
    await cp.close();
  });

  it('re-uploads the outbox first, once, with exactly the bytes it signed', async () => {
    const { dataDir, entry, pubkey } = await crashedAgentDir();
    cp.lease(item, pubkey);
    const t = await makeAgent(cp, { dataDir });
    await t.agent.start();
    await cp.waitFor(() => t.workEvents().length === 1);
    expect(t.workEvents()[0]).toMatchObject({
      work_id: 'wrk_crash',
      outcome: 'completed',
      result_hash: entry.result_hash,
    });
    const results = cp.calls('result');
    expect(results.map((r) => r.body.toString())).toEqual([JSON.stringify(resultBody(entry))]);
    expect(cp.calls('receipt').map((r) => r.body.toString())).toEqual([JSON.stringify(entry.receipt)]);
    expect(sha256Hex(cp.results.get('wrk_crash')?.output ?? '')).toBe(entry.result_hash);
    // Before any new work was asked for.
    const firstPoll = cp.requests.findIndex((r) => r.path.startsWith('/api/v1/node/work?'));
    const firstUpload = cp.requests.findIndex((r) => r.path === '/api/v1/node/work/wrk_crash/result');
    expect(firstUpload).toBeGreaterThan(-1);
    expect(firstPoll === -1 || firstPoll > firstUpload).toBe(true);
    expect(await readdir(join(dataDir, 'outbox'))).toEqual([]);
  });

  it('counts a 409 on the identical re-upload as done and still delivers the receipt', async () => {
    const { dataDir, entry, pubkey } = await crashedAgentDir();
    cp.lease(item, pubkey);
    // The crash came after the result was delivered but before the receipt.
    const identity = await loadOrCreateIdentity(dataDir);
    const earlier = createNodeClient({ server: cp.url, apiKey: cp.apiKey, identity });
    await earlier.register({});
    await earlier.uploadResult(entry.work_id, resultBody(entry));
    cp.failNext('result', [409]);
    const t = await makeAgent(cp, { dataDir });
    await t.agent.start();
    await cp.waitFor(() => t.workEvents().length === 1);
    expect(t.workEvents()[0]).toMatchObject({
      outcome: 'completed',
      message: '409 counted as already delivered: result: injected 409',
    });
    expect(cp.calls('result').map((r) => r.status)).toEqual([200, 409]);
    expect(cp.receipts.get('wrk_crash')?.signature).toBe(entry.receipt.signature);
    expect(await readdir(join(dataDir, 'outbox'))).toEqual([]);
  });

  it('moves entries the server refuses for good, and unreadable files, to outbox/rejected', async () => {
    const { dataDir } = await crashedAgentDir(); // not leased: the server answers 404
    await writeFile(join(dataDir, 'outbox', 'wrk_garbage.json'), '{"work_id": "wrk_garbage"');
    const t = await makeAgent(cp, { dataDir });
    await t.agent.start();
    await cp.waitFor(() => t.workEvents().length === 1);
    expect(t.workEvents()[0]).toMatchObject({
      work_id: 'wrk_crash',
      outcome: 'refused',
      message: 'result: 404 work not leased to this node',
    });
    expect(t.events.some((e) => e.event === 'warning' && e.message.includes('wrk_garbage.json'))).toBe(true);
    expect((await readdir(join(dataDir, 'outbox', 'rejected'))).sort()).toEqual(['wrk_crash.json', 'wrk_garbage.json']);
    expect(cp.calls('receipt')).toEqual([]);
  });

  it('keeps an entry it could not deliver before the deadline, for the next start', async () => {
    const { dataDir, pubkey } = await crashedAgentDir();
    cp.lease(item, pubkey);
    cp.failNext('result', Array(1000).fill(503));
    const t = await makeAgent(cp, { dataDir, timing: { uploadDeadlineMs: 150 } });
    await t.agent.start();
    await cp.waitFor(() => t.workEvents().length === 1);
    expect(t.workEvents()[0]?.outcome).toBe('undelivered');
    expect(await readdir(join(dataDir, 'outbox'))).toEqual(['wrk_crash.json']);
    expect(cp.calls('result').length).toBeGreaterThan(1);
  });

  it('rejects a tampered outbox file whose output no longer matches its hash', async () => {
    const { dataDir, entry } = await crashedAgentDir();
    await mkdir(join(dataDir, 'outbox'), { recursive: true });
    await writeFile(
      join(dataDir, 'outbox', 'wrk_crash.json'),
      JSON.stringify({ ...entry, output: `${entry.output} ` }),
    );
    const { entries, invalid } = await createOutbox(dataDir).list();
    await rm(dataDir, { recursive: true, force: true });
    expect(entries).toEqual([]);
    expect(invalid).toEqual(['wrk_crash.json']);
  });
});

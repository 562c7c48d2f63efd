import { existsSync } from 'node:fs';
import { appendFile, mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { sha256Hex } from '@svc/protocol';
import {
  createNodeClient,
  createOutbox,
  JOURNAL_ENTRIES,
  jsonOutput,
  loadOrCreateIdentity,
  outboxWorkIds,
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

  it('makes the outbox directory again when it went away under a running outbox', async () => {
    const { dataDir, entry } = await crashedAgentDir();
    const outbox = createOutbox(dataDir);
    await outbox.put(entry);
    await rm(join(dataDir, 'outbox'), { recursive: true, force: true });
    await outbox.put(entry);
    expect(outboxWorkIds(dataDir)).toEqual(['wrk_crash']);
    await rm(dataDir, { recursive: true, force: true });
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

describe('the outbox journal (gateway entries, durable: false)', () => {
  const dirs: string[] = [];
  afterEach(async () => {
    for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
  });

  async function sealer() {
    const dataDir = await mkdtemp(join(tmpdir(), 'svc-node-journal-'));
    dirs.push(dataDir);
    const identity = await loadOrCreateIdentity(dataDir);
    const seal = (n: number): OutboxEntry =>
      sealResult({
        item: {
          work_id: `wrk_j${n}`,
          job_id: `chatcmpl-${n}`,
          type: 'chat',
          kind: 0,
          model: 'tinyllama',
          payload: {},
          stream: false,
          lease_expires_at: new Date().toISOString(),
        },
        run: jsonOutput({ content: `answer ${n}` }, { metering_units: n, usage: {}, engine: 'fake' }),
        identity,
        metadata: { model: 'tinyllama', engine: 'fake', duration_ms: 1 },
      });
    const journals = async () => (await readdir(join(dataDir, 'outbox'))).filter((n) => n.startsWith('journal-'));
    return { dataDir, seal, journals };
  }

  it('appends entries and tombstones to a journal; a restart reads back exactly the entries not removed, byte for byte', async () => {
    const { dataDir, seal, journals } = await sealer();
    const outbox = createOutbox(dataDir);
    const [a, b, c] = [seal(1), seal(2), seal(3)];
    for (const e of [a, b, c]) await outbox.put(e, { durable: false });
    await outbox.remove(b.work_id);
    // No file of its own per entry: one journal.
    expect(await readdir(join(dataDir, 'outbox'))).toEqual(await journals());
    expect(await journals()).toHaveLength(1);
    expect(outboxWorkIds(dataDir)).toEqual(['wrk_j1', 'wrk_j3']);
    // As after a kill -9: another outbox on the same directory.
    const { entries, invalid } = await createOutbox(dataDir).list();
    expect(invalid).toEqual([]);
    expect(entries.map((e) => JSON.stringify(e)).sort()).toEqual([JSON.stringify(a), JSON.stringify(c)]);
  });

  it('cuts a line torn by a kill during its write (never sent) and appends after it on a line of its own', async () => {
    const { dataDir, seal, journals } = await sealer();
    const first = createOutbox(dataDir);
    await first.put(seal(1), { durable: false });
    await first.put(seal(2), { durable: false });
    const [name] = await journals();
    const path = join(dataDir, 'outbox', name ?? '');
    await appendFile(path, JSON.stringify(seal(3)).slice(0, 40));
    const restarted = createOutbox(dataDir);
    expect((await restarted.list()).entries.map((e) => e.work_id)).toEqual(['wrk_j1', 'wrk_j2']);
    // The tombstone goes to the earlier run's journal, after the cut.
    await restarted.remove('wrk_j1');
    await restarted.put(seal(4), { durable: false });
    const lines = (await readFile(path, 'utf8')).split('\n');
    expect(lines.at(-1)).toBe('');
    expect(
      lines.slice(0, -1).map((line) => (JSON.parse(line) as { work_id?: string; done?: string }).work_id ?? 'done'),
    ).toEqual(['wrk_j1', 'wrk_j2', 'done']);
    expect((await createOutbox(dataDir).list()).entries.map((e) => e.work_id).sort()).toEqual(['wrk_j2', 'wrk_j4']);
    expect(existsSync(join(dataDir, 'outbox', 'rejected'))).toBe(false);
  });

  it(`starts a new journal after ${JOURNAL_ENTRIES} entries, deletes a full one once all its entries are removed, and empties the one taking entries`, async () => {
    const { dataDir, seal, journals } = await sealer();
    const outbox = createOutbox(dataDir);
    const entries = Array.from({ length: JOURNAL_ENTRIES + 1 }, (_, i) => seal(i + 1));
    for (const e of entries) await outbox.put(e, { durable: false });
    expect(await journals()).toHaveLength(2);
    for (const e of entries.slice(0, JOURNAL_ENTRIES)) await outbox.remove(e.work_id);
    const [last] = await journals();
    expect(await journals()).toHaveLength(1);
    expect(outboxWorkIds(dataDir)).toEqual([`wrk_j${JOURNAL_ENTRIES + 1}`]);
    await outbox.remove(`wrk_j${JOURNAL_ENTRIES + 1}`);
    expect(await journals()).toEqual([last]);
    expect((await stat(join(dataDir, 'outbox', last ?? ''))).size).toBe(0);
    expect(outboxWorkIds(dataDir)).toEqual([]);
  });

  it('keeps only the later entry when the same work is put twice, also across journals', async () => {
    const { dataDir, seal } = await sealer();
    const outbox = createOutbox(dataDir);
    const first = seal(1);
    const second = { ...first, receipt: { ...first.receipt, metadata: { ...first.receipt.metadata, duration_ms: 2 } } };
    await outbox.put(first, { durable: false });
    for (let i = 2; i <= JOURNAL_ENTRIES; i++) await outbox.put(seal(i), { durable: false });
    await outbox.put(second, { durable: false });
    for (let i = 2; i <= JOURNAL_ENTRIES; i++) await outbox.remove(`wrk_j${i}`);
    // The full journal held only replaced or removed entries: it is gone, and a restart reads the later entry.
    expect(outboxWorkIds(dataDir)).toEqual(['wrk_j1']);
    expect((await createOutbox(dataDir).list()).entries).toEqual([second]);
    await outbox.remove('wrk_j1');
    expect(outboxWorkIds(dataDir)).toEqual([]);
  });

  it('moves a refused journal entry to outbox/rejected as a file of its own', async () => {
    const { dataDir, seal } = await sealer();
    const outbox = createOutbox(dataDir);
    const a = seal(1);
    await outbox.put(a, { durable: false });
    await outbox.put(seal(2), { durable: false });
    await outbox.reject(a.work_id);
    expect(outboxWorkIds(dataDir)).toEqual(['wrk_j2']);
    expect(JSON.parse(await readFile(join(dataDir, 'outbox', 'rejected', 'wrk_j1.json'), 'utf8'))).toEqual(a);
  });
});

import {
  checkConsistency,
  checkInclusion,
  logLeafHashHex,
  openNote,
  parseCheckpoint,
  parseNoteVerifierKey,
  type NoteVerifierKey,
} from '@svc/protocol/verify';
import { canonicalJson } from '@svc/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createTestApp, eventually, signUp, type TestApp, type TestBuyer } from '../../../test/harness.js';
import { closeTestRuns } from '../../../test/log-runs.js';
import { rotatePlatformKey } from '../../platform/secrets.js';
import { allCheckpoints, leafOfRun } from './store.js';

interface Leaf {
  run_id: string;
  subject_type: string;
  subject_id: string;
  root_hash: string;
  event_count: number;
  closed_at: string;
}

describe('the transparency log (DESIGN.md section 17)', () => {
  let t: TestApp;
  let buyer: TestBuyer;
  let other: TestBuyer;
  let keys: NoteVerifierKey[];
  const get = (url: string, key?: string) => t.app.inject({ method: 'GET', url, headers: key ? bearer(key) : {} });
  const runIdOf = async (subject: string) =>
    (await get(`/api/v1/jobs/${subject}/evidence`, buyer.apiKey)).json().run.id as string;
  const verifierKeys = async () => {
    const body = (await get('/api/v1/keys/platform')).json() as { log: { origin: string; verifier_keys: string[] } };
    const parsed = await Promise.all(body.log.verifier_keys.map(parseNoteVerifierKey));
    return parsed.filter((k): k is NoteVerifierKey => !('problem' in k));
  };
  const checkpointNow = async () => {
    const note = (await get('/api/v1/log/checkpoint')).body;
    const opened = await openNote(note, keys);
    if ('problem' in opened) throw new Error(opened.problem);
    const cp = parseCheckpoint(opened.text);
    if ('problem' in cp) throw new Error(cp.problem);
    return cp;
  };

  beforeAll(async () => {
    t = await createTestApp({ env: { SVC_LOG_CHECKPOINT_MS: '100', SVC_LOG_ORIGIN: 'svc.test/log' } });
    buyer = await signUp(t.app);
    other = await signUp(t.app);
    keys = await verifierKeys();
  });
  afterAll(() => t.close());

  it('publishes the note verifier key of the platform key under the origin', async () => {
    const body = (await get('/api/v1/keys/platform')).json();
    expect(body.log.origin).toBe('svc.test/log');
    expect(keys).toHaveLength(1);
    expect(keys[0]?.name).toBe('svc.test/log');
    expect(keys[0]?.public_key_hex).toBe(body.keys[0].public_key_hex);
  });

  it('gives every closed run a dense index, proves each one in, and every checkpoint extends the one before', async () => {
    const subjects: string[] = [];
    for (let round = 0; round < 3; round++) {
      subjects.push(...(await closeTestRuns(t.ctx, buyer.orgId, 7)));
      // Let the sequencer sign a checkpoint between rounds, so that there are several.
      const want = subjects.length;
      await eventually(async () => (await checkpointNow()).tree_size >= want || undefined);
    }
    const cp = await checkpointNow();
    expect(cp.tree_size).toBe(21);
    const indexes: number[] = [];
    for (const subject of subjects) {
      const runId = await runIdOf(subject);
      const res = await get(`/api/v1/log/proof/inclusion?run_id=${runId}`, buyer.apiKey);
      expect(res.statusCode).toBe(200);
      const body = res.json() as {
        leaf_index: number;
        leaf: Leaf;
        leaf_hash: string;
        proof: string[];
        tree_size: number;
      };
      expect(body.tree_size).toBe(21);
      expect(body.leaf.run_id).toBe(runId);
      expect(body.leaf.subject_id).toBe(subject);
      expect(body.leaf.closed_at).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
      expect(await logLeafHashHex(canonicalJson(body.leaf))).toBe(body.leaf_hash);
      expect(await checkInclusion(body.proof, cp.tree_size, cp.root_hash_b64, body.leaf_index, body.leaf_hash)).toBe(
        true,
      );
      indexes.push(body.leaf_index);
    }
    expect(indexes.sort((a, b) => a - b)).toEqual(Array.from({ length: 21 }, (_, i) => i));
    const checkpoints = (await allCheckpoints(t.ctx.db)).filter((c) => c.tree_size > 0);
    expect(checkpoints.length).toBeGreaterThanOrEqual(3);
    for (let i = 1; i < checkpoints.length; i++) {
      const [a, b] = [checkpoints[i - 1], checkpoints[i]];
      if (!a || !b) continue;
      const res = await get(`/api/v1/log/proof/consistency?from=${a.tree_size}&to=${b.tree_size}`);
      expect(res.statusCode).toBe(200);
      const rootA = Buffer.from(a.root_hash_hex, 'hex').toString('base64');
      const rootB = Buffer.from(b.root_hash_hex, 'hex').toString('base64');
      expect(await checkConsistency(res.json().proof, b.tree_size, rootB, a.tree_size, rootA)).toBe(true);
      // Each stored checkpoint is a note signed by the published key.
      expect('problem' in (await openNote(b.note, keys))).toBe(false);
    }
  });

  let first: string | undefined;
  const firstRun = async () => {
    first ??= await runIdOf((await closeTestRuns(t.ctx, buyer.orgId, 1))[0] ?? '');
    await eventually(async () => typeof (await leafOfRun(t.ctx.db, first ?? ''))?.leaf_index === 'number' || undefined);
    await eventually(async () => {
      const leaf = await leafOfRun(t.ctx.db, first ?? '');
      return (await checkpointNow()).tree_size > (leaf?.leaf_index ?? Infinity) || undefined;
    });
    return first;
  };

  it('serves hash tiles as tlog names them, cacheable, and 404 for a tile the tree does not have', async () => {
    const leaf = await leafOfRun(t.ctx.db, await firstRun());
    const cp = await checkpointNow();
    const tile = await get(`/api/v1/log/tile/8/0/000.p/${cp.tree_size}`);
    expect(tile.statusCode).toBe(200);
    expect(tile.headers['content-type']).toBe('application/octet-stream');
    expect(tile.headers['cache-control']).toBe('public, max-age=60');
    expect(tile.rawPayload.length).toBe(32 * cp.tree_size);
    // The tile's hashes are the leaf hashes in index order.
    const at = (leaf?.leaf_index ?? 0) * 32;
    expect(tile.rawPayload.subarray(at, at + 32).toString('hex')).toBe(leaf?.leaf_hash_hex);
    for (const missing of ['8/0/000', '8/1/000.p/1', '8/0/001.p/3', '4/0/000.p/2', '8/0/0', 'x', '8/0/000.p/0'])
      expect((await get(`/api/v1/log/tile/${missing}`)).statusCode, missing).toBe(404);
    const checkpoint = await get('/api/v1/log/checkpoint');
    expect(checkpoint.headers['content-type']).toBe('text/plain; charset=utf-8');
    expect(checkpoint.headers['cache-control']).toBe('public, max-age=1');
  });

  it("answers an inclusion proof to the run's own tenant only, and refuses bad input with a 400", async () => {
    const runId = await firstRun();
    expect((await get(`/api/v1/log/proof/inclusion?run_id=${runId}`, other.apiKey)).statusCode).toBe(404);
    expect((await get(`/api/v1/log/proof/inclusion?run_id=${runId}`)).statusCode).toBe(401);
    expect((await get('/api/v1/log/proof/inclusion?run_id=run_nope', buyer.apiKey)).statusCode).toBe(404);
    const size = (await checkpointNow()).tree_size;
    const leaf = await leafOfRun(t.ctx.db, runId);
    for (const [url, status] of [
      [`/api/v1/log/proof/inclusion?run_id=${runId}&tree_size=${size + 1}`, 400],
      [`/api/v1/log/proof/inclusion?run_id=${runId}&tree_size=${leaf?.leaf_index ?? 0}`, 400],
      [`/api/v1/log/proof/inclusion?run_id=${runId}&tree_size=abc`, 400],
      ['/api/v1/log/proof/consistency?from=0&to=1', 400],
      ['/api/v1/log/proof/consistency?from=3&to=2', 400],
      [`/api/v1/log/proof/consistency?from=1&to=${size + 1}`, 400],
      ['/api/v1/log/proof/consistency?from=1', 400],
      ['/api/v1/log/proof/consistency?from=1&to=99999999999999999999', 400],
    ] as const) {
      const res = await get(url, buyer.apiKey);
      expect(res.statusCode, url).toBe(status);
      expect(res.json().error, url).toBe(status === 400 ? 'invalid_request' : 'not_found');
    }
  });

  it("carries verifier.log in the run's bundle, and pending when the run is in no checkpoint in time", async () => {
    const [subject] = await closeTestRuns(t.ctx, buyer.orgId, 1);
    const started = Date.now();
    const bundle = (await get(`/api/v1/jobs/${subject}/evidence/bundle`, buyer.apiKey)).json();
    const log = bundle.verifier.log;
    expect(Object.keys(log).sort()).toEqual(
      ['checkpoint', 'inclusion_proof', 'leaf', 'leaf_hash', 'leaf_index', 'origin', 'verifier_keys'].sort(),
    );
    expect(Date.now() - started).toBeLessThan(2000);
    expect(log.origin).toBe('svc.test/log');
    expect(log.leaf.run_id).toBe(bundle.evidence.run.id);
    expect(log.leaf.root_hash).toBe(bundle.evidence.run.root_hash);
    expect(log.leaf.event_count).toBe(bundle.evidence.run.event_count);
    expect(log.leaf.subject_id).toBe(subject);
    const parsedKeys = await Promise.all((log.verifier_keys as string[]).map(parseNoteVerifierKey));
    const opened = await openNote(
      log.checkpoint,
      parsedKeys.filter((k): k is NoteVerifierKey => !('problem' in k)),
    );
    if ('problem' in opened) throw new Error(opened.problem);
    const cp = parseCheckpoint(opened.text);
    if ('problem' in cp) throw new Error(cp.problem);
    expect(await logLeafHashHex(canonicalJson(log.leaf))).toBe(log.leaf_hash);
    expect(
      await checkInclusion(log.inclusion_proof, cp.tree_size, cp.root_hash_b64, log.leaf_index, log.leaf_hash),
    ).toBe(true);

    // With no sequencer running the bundle waits twice the interval (200 ms), then says pending.
    await t.ctx.transparencyLog.sequencer.stop();
    const [late] = await closeTestRuns(t.ctx, buyer.orgId, 1);
    const waited = Date.now();
    const pending = (await get(`/api/v1/jobs/${late}/evidence/bundle`, buyer.apiKey)).json().verifier.log;
    expect(Date.now() - waited).toBeGreaterThanOrEqual(190);
    expect(pending.status).toBe('pending');
    expect(pending.leaf.subject_id).toBe(late);
    expect(pending.leaf.run_id).toBe(await runIdOf(late ?? ''));
  });

  it('keeps old checkpoints verifiable after a key rotation: both keys are listed', async () => {
    const before = (await get('/api/v1/log/checkpoint')).body;
    await rotatePlatformKey(t.ctx.db);
    const after = await verifierKeys();
    expect(after).toHaveLength(2);
    expect(after.every((k) => k.name === 'svc.test/log')).toBe(true);
    expect('problem' in (await openNote(before, after))).toBe(false);
  });
});

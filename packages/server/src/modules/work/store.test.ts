import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKey, createTestApp, createTestNode, signUp, type TestApp } from '../../../test/harness.js';
import { newId } from '../../platform/ids.js';
import {
  cancelOpenWork,
  countOpenWork,
  findWork,
  findWorkResultInline,
  insertLeasedWork,
  insertWork,
  jobWorkAmong,
  lockWorkForReceipt,
  noteWorkFailure,
  renewLeases,
  setWorkStatus,
  storeWorkResult,
  takeLeasedWork,
  undispatchWork,
  workState,
} from './store.js';

/** The one owner of `work_items`, against the real store (both stores run this file). */
describe('work store', () => {
  let t: TestApp;
  let orgId: string;
  let nodeId: string;
  beforeAll(async () => {
    t = await createTestApp();
    const operator = await signUp(t.app);
    orgId = operator.orgId;
    nodeId = (await createTestNode(t.app, await createKey(t.app, operator, ['operator']))).nodeId;
  });
  afterAll(async () => {
    await t.close();
  });

  const jobWork = (jobId = newId('job')) => ({
    id: newId('wrk'),
    job_id: jobId,
    org_id: orgId,
    node_id: nodeId,
    type: 'job',
    kind: 1,
    model: null,
    payload: { input: 'x' },
    stream: false,
    price_micro_per_unit: 7,
  });
  const gatewayWork = (dispatched = false) => ({
    id: newId('wrk'),
    owner_id: newId('chatcmpl'),
    org_id: orgId,
    node_id: nodeId,
    type: 'chat',
    model: 'echo',
    payload: { messages: [] },
    stream: true,
    lease_seconds: 30,
    dispatched,
  });

  it('leases job work and counts it open until it ends', async () => {
    const before = await countOpenWork(t.ctx.db, nodeId);
    const w = await insertWork(t.ctx.db, jobWork());
    expect([w.status, w.kind, w.price_micro_per_unit, w.payload]).toEqual(['leased', 1, 7, { input: 'x' }]);
    expect(await countOpenWork(t.ctx.db, nodeId)).toBe(before + 1);
    await setWorkStatus(t.ctx.db, w.id, 'lost');
    expect(await countOpenWork(t.ctx.db, nodeId)).toBe(before);
    expect((await findWork(t.ctx.db, w.id))?.status).toBe('lost');
  });

  it('hands out leased gateway work once; undispatched work comes back at the next take', async () => {
    const waiting = await insertLeasedWork(t.ctx.db, gatewayWork());
    const handed = await insertLeasedWork(t.ctx.db, gatewayWork(true));
    const first = await takeLeasedWork(t.ctx.db, nodeId, 10);
    expect(first.map((w) => w.id)).toEqual([waiting.id]);
    expect(await takeLeasedWork(t.ctx.db, nodeId, 10)).toEqual([]);
    await undispatchWork(t.ctx.db, handed.id);
    expect((await takeLeasedWork(t.ctx.db, nodeId, 10)).map((w) => w.id)).toEqual([handed.id]);
    for (const w of [waiting, handed]) await cancelOpenWork(t.ctx.db, w.id, 'test over');
  });

  it('stores one result; a second store of leased-with-result work changes nothing', async () => {
    const w = await insertWork(t.ctx.db, jobWork());
    const result = { result_hash: 'ab'.repeat(32), content_type: 'text/plain', bytes: 3, metering_units: 5 };
    const inline = Buffer.from('abc');
    expect(
      await storeWorkResult(t.ctx.db, w.id, { ...result, usage: { tokens: 5 }, status: 'delivered', inline }),
    ).toBe(true);
    expect(await storeWorkResult(t.ctx.db, w.id, { ...result, status: 'completed', inline: Buffer.from('xyz') })).toBe(
      false,
    );
    expect(await findWorkResultInline(t.ctx.db, w.id)).toEqual({ bytes: inline, contentType: 'text/plain' });
    expect(await findWorkResultInline(t.ctx.db, 'wrk_none')).toBeUndefined();
    const row = await findWork(t.ctx.db, w.id);
    expect([row?.status, row?.result_hash, row?.metering_units, row?.usage]).toEqual([
      'delivered',
      result.result_hash,
      5,
      { tokens: 5 },
    ]);
    const locked = await t.ctx.db.transaction((tx) => lockWorkForReceipt(tx, w.job_id, nodeId));
    expect([locked?.id, locked?.has_receipt]).toEqual([w.id, false]);
  });

  it('cancels open work once, keeping a recorded error when no reason is given', async () => {
    const plain = await insertWork(t.ctx.db, jobWork());
    await noteWorkFailure(t.ctx.db, plain.id, 'node said no', true);
    expect(await cancelOpenWork(t.ctx.db, plain.id)).toBe(true);
    expect(await workState(t.ctx.db, plain.id)).toEqual({
      status: 'cancelled',
      error: 'node said no',
      error_retryable: true,
    });
    expect(await cancelOpenWork(t.ctx.db, plain.id, 'again')).toBe(false);
    const reasoned = await insertLeasedWork(t.ctx.db, gatewayWork());
    expect(await cancelOpenWork(t.ctx.db, reasoned.id, 'client gone')).toBe(true);
    expect((await workState(t.ctx.db, reasoned.id))?.error).toBe('client gone');
  });

  it('renews what the node holds, names what it lost, and finds the job work among it', async () => {
    const held = await insertWork(t.ctx.db, jobWork());
    const finished = await insertWork(t.ctx.db, jobWork());
    await setWorkStatus(t.ctx.db, finished.id, 'completed');
    const cancelled = await insertLeasedWork(t.ctx.db, gatewayWork());
    await cancelOpenWork(t.ctx.db, cancelled.id, 'buyer cancelled');
    const ids = [held.id, finished.id, cancelled.id];
    expect(await renewLeases(t.ctx.db, nodeId, ids)).toEqual({ renewed: [held.id], gone: [cancelled.id] });
    // Work with no row at all (gateway work whose opening was lost: its receipt's ticket rebuilds
    // it) is not named: a node told to stop it would drop its signed receipt.
    const unknown = 'wrk_01jd4x8k2m7q9w3e5r6t8y0u2z';
    expect(await renewLeases(t.ctx.db, nodeId, [cancelled.id, unknown])).toEqual({ renewed: [], gone: [cancelled.id] });
    const jobs = await jobWorkAmong(t.ctx.db, ids);
    expect(jobs.map((r) => [r.id, r.job_id]).sort()).toEqual(
      [
        [held.id, held.job_id],
        [finished.id, finished.job_id],
      ].sort(),
    );
    await setWorkStatus(t.ctx.db, held.id, 'lost');
  });
});

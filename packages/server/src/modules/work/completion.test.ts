import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  bearer,
  createKey,
  createTestApp,
  createTestNode,
  signUp,
  type TestApp,
  type TestBuyer,
} from '../../../test/harness.js';
import type { TestNode } from '../../../test/test-node.js';
import { eventually } from '../../../test/waits.js';
import type { JobCompletion, WorkOwners } from './completion.js';
import { sweepExpiredLeases } from './leases.js';

/**
 * The node protocol ends a job's attempt only through the completion interface registered at
 * start-up (`ctx.completions`): a receipt, a reported failure and an expired lease each call the
 * jobs' implementation, in the order the interface states, and the job ends as before.
 */
describe('the completion interface of work items', () => {
  let t: TestApp;
  let buyer: TestBuyer;
  let node: TestNode;
  const calls: string[] = [];
  let registered: WorkOwners;

  beforeAll(async () => {
    t = await createTestApp();
    buyer = await signUp(t.app);
    node = await createTestNode(t.app, await createKey(t.app, await signUp(t.app), ['operator']), {
      price_micro_per_unit: { '1': 0.5 },
    });
    registered = t.ctx.completions;
    // Every method of the jobs' completion, recorded by name as the intake calls it (its other
    // members, such as `takesLapsed`, as they are).
    const recording = Object.fromEntries(
      Object.entries(registered.job).map(([name, method]) => [
        name,
        typeof method !== 'function'
          ? method
          : (...args: unknown[]) => {
              calls.push(name);
              return (method as (...a: unknown[]) => unknown).apply(registered.job, args);
            },
      ]),
    ) as unknown as JobCompletion;
    t.ctx.completions = { ...registered, job: recording };
  });
  afterAll(async () => {
    t.ctx.completions = registered;
    await t.close();
  });

  const submitAndTake = async () => {
    const submit = await t.app.inject({
      method: 'POST',
      url: '/api/v1/marketplace/jobs',
      headers: bearer(buyer.apiKey),
      payload: {
        kind: 1,
        budget: 1.5,
        max_price_per_unit: 0.000001,
        currency: 'CAD',
        model: 'tinyllama',
        inline_text: 'a prompt\n',
      },
    });
    expect(submit.statusCode).toBe(201);
    const [work] = await node.poll({ waitMs: 1000 });
    if (!work) throw new Error('no work');
    calls.length = 0;
    return { jobId: submit.json().job_id as string, work };
  };
  const status = async (jobId: string) =>
    (await t.ctx.db.query<{ status: string }>('SELECT status FROM jobs WHERE id = $1', [jobId])).rows[0]?.status;

  it('completes a job from its receipt through checkReceipt, lockOwner, receiptFacts, complete, afterReceipt', async () => {
    const { jobId, work } = await submitAndTake();
    await node.heartbeat([work.work_id]);
    expect(calls).toEqual(['started']);
    calls.length = 0;
    expect((await node.complete(work, 'an answer', 7)).statusCode).toBe(200);
    expect(calls).toEqual(['checkReceipt', 'lockOwner', 'meteringBound', 'receiptFacts', 'complete', 'afterReceipt']);
    expect(await status(jobId)).toBe('completed');
  });

  it('fails a job on its node report through fail and afterFailure', async () => {
    const { jobId, work } = await submitAndTake();
    const res = await node.call('POST', `/api/v1/node/work/${work.work_id}/fail`, {
      message: 'the model would not load',
      retryable: false,
    });
    expect(res.statusCode).toBe(200);
    expect(calls).toEqual(['fail', 'afterFailure']);
    expect(await status(jobId)).toBe('failed');
  });

  it('puts a job whose lease expired back in the queue through lost', async () => {
    const { jobId, work } = await submitAndTake();
    await t.ctx.db.query("UPDATE work_items SET lease_expires_at = now() - interval '1 second' WHERE id = $1", [
      work.work_id,
    ]);
    // This sweep, or the app's own background one if it came first: each lease is swept once.
    await sweepExpiredLeases(t.ctx);
    await eventually(async () => (await status(jobId)) === 'pending');
    expect(calls).toEqual(['lost']);
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  bearer,
  createKey,
  createTestApp,
  createTestNode,
  signUp,
  type TestApp,
  type TestBuyer,
  type TestNode,
} from '../../../test/harness.js';
import { sweepExpiredLeases } from '../work/leases.js';
import { followWork } from './follow.js';

/**
 * A request follows its work (`followWork`): its end is read from the store when the hub says the
 * work changed, and once a second besides. A lease that expires is announced by the sweep, so a
 * request whose node went away fails over at once, not at its next look.
 */
describe('following work whose lease expired', () => {
  let t: TestApp;
  let buyer: TestBuyer;
  let node: TestNode;

  beforeAll(async () => {
    // The test runs the sweep itself.
    t = await createTestApp({ periodicTasks: false });
    buyer = await signUp(t.app);
    node = await createTestNode(t.app, await createKey(t.app, await signUp(t.app), ['operator']));
  });
  afterAll(() => t.close());

  it('ends as lost as soon as the sweep marks it, without waiting for its own look', async () => {
    const submit = await t.app.inject({
      method: 'POST',
      url: '/api/v1/marketplace/jobs',
      headers: bearer(buyer.apiKey),
      payload: { kind: 1, budget: 0.05, max_price_per_unit: 0.00001, currency: 'CAD', inline_text: 'x' },
    });
    expect(submit.statusCode).toBe(201);
    const [work] = await node.poll({ waitMs: 1000 });
    if (!work) throw new Error('no work');
    // Its own look only every minute: only the sweep's message can end it within the test.
    const follower = followWork(t.ctx, work.work_id, { pollMs: 60_000 });
    try {
      await t.ctx.db.query("UPDATE work_items SET lease_expires_at = now() - interval '1 second' WHERE id = $1", [
        work.work_id,
      ]);
      await sweepExpiredLeases(t.ctx);
      const next = await follower.next(Date.now() + 5_000);
      expect(next).toMatchObject({ kind: 'ended', state: { status: 'lost' } });
    } finally {
      follower.close();
    }
  });
});

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

/**
 * A job's first heartbeat moves it to `running` and records `job_running` and the evidence event
 * `job.started` in one transaction: a failure (or a kill -9) between them never leaves a running
 * job whose evidence run does not say it started.
 */
describe('a job that starts', () => {
  let t: TestApp;
  let buyer: TestBuyer;
  let operatorKey: string;
  beforeAll(async () => {
    t = await createTestApp();
    buyer = await signUp(t.app);
    operatorKey = await createKey(t.app, await signUp(t.app), ['operator']);
  });
  afterAll(() => t.close());

  it('moves to running together with its events, or not at all', async () => {
    const node = await createTestNode(t.app, operatorKey, { price_micro_per_unit: { '1': 0.5 } });
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
    const jobId = submit.json().job_id as string;
    const [work] = await node.poll({ waitMs: 1000 });
    if (!work) throw new Error('no work');
    const status = async () =>
      (await t.ctx.db.query<{ status: string }>('SELECT status FROM jobs WHERE id = $1', [jobId])).rows[0]?.status;
    // The evidence event cannot be written for a moment (as if the process died before it).
    await t.ctx.db.exec(`
      CREATE FUNCTION refuse_started() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW.event_type = 'job.started' THEN RAISE EXCEPTION 'job.started refused by the test'; END IF;
        RETURN NEW;
      END $$;
      CREATE TRIGGER refuse_started BEFORE INSERT ON evidence_events FOR EACH ROW EXECUTE FUNCTION refuse_started();`);
    await expect(node.heartbeat([work.work_id])).rejects.toThrow(/heartbeat failed: 500/);
    expect(await status()).toBe('assigned');
    await t.ctx.db.exec('DROP TRIGGER refuse_started ON evidence_events; DROP FUNCTION refuse_started();');
    // The next heartbeat starts it, with its events.
    expect((await node.heartbeat([work.work_id])).cancel).toEqual([]);
    expect(await status()).toBe('running');
    const run = await t.app.inject({
      method: 'GET',
      url: `/api/v1/jobs/${jobId}/evidence`,
      headers: bearer(buyer.apiKey),
    });
    const types = (run.json() as { events: { event_type: string }[] }).events.map((e) => e.event_type);
    expect(types.filter((type) => type === 'job.started')).toHaveLength(1);
  });
});

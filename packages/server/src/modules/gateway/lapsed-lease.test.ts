import { afterEach, describe, expect, it } from 'vitest';
import { NODE_HEADERS, requestMessage, sha256Hex, signHex, signSvc1 } from '@svc/protocol';
import {
  bearer,
  createKey,
  createTestApp,
  createTestNode,
  createTestStore,
  signUp,
  watchPolls,
  type TestApp,
  type TestNode,
  type TestStore,
  type WorkItem,
} from '../../../test/harness.js';
import type { App } from '../../app.js';
import { reconcileAccount } from '../billing/service.js';
import { sweepExpiredLeases } from '../work/leases.js';
import { sweepAbandonedRequests } from './orphans.js';

const OUTPUT = JSON.stringify({
  content: 'hi',
  finish_reason: 'stop',
  usage: { prompt_tokens: 3, completion_tokens: 1 },
});

/** The node's receipt with its result inline, as the agent re-sends it from its outbox, to `app`. */
function resend(app: App, node: TestNode, work: WorkItem, jobId = work.job_id) {
  const result_hash = sha256Hex(OUTPUT);
  const body = JSON.stringify({
    job_id: jobId,
    pubkey: node.pubkey,
    result_hash,
    metering_units: 4,
    signature: signSvc1(
      { job_id: jobId, node_public_key_hex: node.pubkey, result_hash_hex: result_hash, metering_units: 4 },
      node.privateKey,
    ),
    metadata: { model: work.model, engine: 'test' },
    result: {
      output: OUTPUT,
      encoding: 'utf8',
      content_type: 'application/json',
      result_hash,
      metering_units: 4,
      usage: { prompt_tokens: 3, completion_tokens: 1 },
    },
  });
  return signedPost(app, node, '/api/v1/node/receipt', body);
}

/** A signed node call to `app` (the node registered on another instance of the same store). */
function signedPost(app: App, node: TestNode, url: string, body: string) {
  const timestamp = Date.now();
  return app.inject({
    method: 'POST',
    url,
    payload: body,
    headers: {
      'content-type': 'application/json',
      [NODE_HEADERS.node]: node.nodeId,
      [NODE_HEADERS.timestamp]: String(timestamp),
      [NODE_HEADERS.signature]: signHex(
        requestMessage({ method: 'POST', pathWithQuery: url, timestamp, body }),
        node.privateKey,
      ),
    },
  });
}

/** The node's heartbeat to `app`, listing `active` (what it runs, or holds an unacknowledged receipt of). */
async function heartbeat(app: App, node: TestNode, active: string[]): Promise<{ cancel: string[] }> {
  const res = await signedPost(app, node, '/api/v1/node/heartbeat', JSON.stringify({ load: 0, active_work: active }));
  expect(res.statusCode).toBe(200);
  return res.json();
}

/**
 * The instance serving a request stops (crash, kill -9, a restart slower than the lease) after the
 * node finished: the node keeps its signed receipt, but the work's lease lapses before any
 * instance takes it. The receipt is still applied when it reaches an instance, as long as the
 * request runs on that attempt: the client may have had its answer, and the node did the work.
 */
describe('a gateway receipt after its lease lapsed', () => {
  let store: TestStore;
  const apps: TestApp[] = [];
  afterEach(async () => {
    for (const t of apps.splice(0)) await t.close().catch(() => undefined);
    await store.drop();
  });

  /**
   * A chat request whose instance went away while it ran; its attempt's lease then lapsed and
   * another instance's sweep marked it lost. Returns that instance, the buyer, the node, its work
   * and probes of the request's state and the buyer's held cents.
   */
  async function lapsedRequest() {
    store = await createTestStore();
    const first = await createTestApp({ store });
    apps.push(first);
    const buyer = await signUp(first.app);
    const operator = await createKey(first.app, await signUp(first.app), ['operator']);
    const node = await createTestNode(first.app, operator, { models: ['tinyllama'] });
    const polls = watchPolls(first.ctx);
    const polled = node.poll({ waitMs: 20_000 });
    await polls.until(1);
    void first.app
      .inject({
        method: 'POST',
        url: '/v1/chat/completions',
        headers: bearer(buyer.apiKey),
        payload: { model: 'tinyllama', messages: [{ role: 'user', content: 'then the instance stops' }] },
      })
      .catch(() => undefined);
    const [work] = await polled;
    if (!work) throw new Error('no work reached the node');
    await first.ctx.writer.settled();
    await first.close();
    apps.splice(0);
    const second = await createTestApp({ store, periodicTasks: false });
    apps.push(second);
    await second.ctx.db.query("UPDATE work_items SET lease_expires_at = now() - interval '1 second' WHERE id = $1", [
      work.work_id,
    ]);
    await sweepExpiredLeases(second.ctx);
    // As if opened, and its attempt ended, a minute ago (the sweep gives a live follow loop 3 s).
    const age = async () => {
      await second.ctx.db.query("UPDATE gateway_requests SET created_at = now() - interval '1 minute' WHERE id = $1", [
        work.job_id,
      ]);
      await second.ctx.db.query("UPDATE work_items SET updated_at = now() - interval '1 minute' WHERE id = $1", [
        work.work_id,
      ]);
    };
    const state = async () =>
      (
        await second.ctx.db.query<{ work: string; request: string; receipts: number; charges: number }>(
          `SELECT (SELECT status FROM work_items WHERE id = $1) AS work,
                  (SELECT status FROM gateway_requests WHERE id = $2) AS request,
                  (SELECT count(*)::int FROM receipts WHERE job_id = $2) AS receipts,
                  (SELECT count(*)::int FROM credit_transactions WHERE ref = $2 AND tx_type = 'charge') AS charges`,
          [work.work_id, work.job_id],
        )
      ).rows[0];
    const held = async () => (await reconcileAccount(second.ctx.db, buyer.orgId)).held_cents;
    return { second, buyer, node, work, age, state, held };
  }

  it('is applied while the request still runs on that attempt (one receipt, one charge, its run signed)', async () => {
    const { second, buyer, node, work, state } = await lapsedRequest();
    expect(await state()).toEqual({ work: 'lost', request: 'running', receipts: 0, charges: 0 });

    const applied = await resend(second.app, node, work);
    expect(applied.statusCode).toBe(200);
    expect(await state()).toEqual({ work: 'completed', request: 'completed', receipts: 1, charges: 1 });
    // Sent again (the ack was lost): applied once.
    expect((await resend(second.app, node, work)).statusCode).toBe(409);
    expect(await state()).toEqual({ work: 'completed', request: 'completed', receipts: 1, charges: 1 });
    const run = await second.app.inject({
      method: 'GET',
      url: `/api/v1/jobs/${work.job_id}/evidence`,
      headers: bearer(buyer.apiKey),
    });
    expect(run.json()).toMatchObject({
      run: { status: 'completed', root_signature_hex: expect.stringMatching(/^[0-9a-f]{128}$/) },
    });
    const audit = await reconcileAccount(second.ctx.db, buyer.orgId);
    expect([audit.held_cents, audit.consistent]).toEqual([0, true]);
  });

  it('is not cancelled by a heartbeat that lists it: the node keeps its receipt, which is then applied', async () => {
    const { second, node, work, age, state, held } = await lapsedRequest();
    // The node still holds the signed receipt (its outbox), so its heartbeat lists the work.
    expect(await heartbeat(second.app, node, [work.work_id])).toMatchObject({ cancel: [] });
    await age();
    expect(await sweepAbandonedRequests(second.ctx)).toBe(0);
    expect(await state()).toEqual({ work: 'lost', request: 'running', receipts: 0, charges: 0 });
    expect((await resend(second.app, node, work)).statusCode).toBe(200);
    expect(await state()).toEqual({ work: 'completed', request: 'completed', receipts: 1, charges: 1 });
    expect(await held()).toBe(0);
  });

  it('is cancelled once its request no longer runs on it', async () => {
    const { second, node, work } = await lapsedRequest();
    await second.ctx.db.query("UPDATE gateway_requests SET status = 'timeout' WHERE id = $1", [work.job_id]);
    expect(await heartbeat(second.app, node, [work.work_id])).toMatchObject({ cancel: [work.work_id] });
  });

  it('fails once a heartbeat no longer lists it, and its request, followed by no instance, ends with nothing held', async () => {
    const { second, node, work, age, state, held } = await lapsedRequest();
    // No hold row (DESIGN.md section 7, revised 2026-11-27): the first instance took the maximum
    // cost from its reservation in memory, and gave the reservation back as it closed.
    expect(await held()).toBe(0);
    // The node never had it, or let it go: its heartbeat does not list it.
    expect(await heartbeat(second.app, node, [])).toMatchObject({ cancel: [] });
    expect(await state()).toEqual({ work: 'failed', request: 'running', receipts: 0, charges: 0 });
    // A live follow loop would have ended it at once; seconds later the request has none.
    expect(await sweepAbandonedRequests(second.ctx)).toBe(0);
    await age();
    expect(await sweepAbandonedRequests(second.ctx)).toBe(1);
    expect(await state()).toEqual({ work: 'failed', request: 'failed', receipts: 0, charges: 0 });
    expect(await held()).toBe(0);
    // The receipt the node does not hold cannot come; one that did would find the request ended.
    expect((await resend(second.app, node, work)).statusCode).toBe(409);
    expect(await sweepAbandonedRequests(second.ctx)).toBe(0);
  });
});

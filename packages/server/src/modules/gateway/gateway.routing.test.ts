import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type OpenAI from 'openai';
import { createTestNode } from '../../../test/harness.js';
import {
  eventually,
  startGatewayFixture,
  type GatewayFixture,
  type GatewayNode,
} from '../../../test/gateway-fixture.js';

type Receipt = { id: string; node_id: string; metadata: Record<string, unknown> };
type Params = OpenAI.Chat.ChatCompletionCreateParamsNonStreaming;

const ask = (content: string, extra: Record<string, unknown> = {}) =>
  ({ model: 'tinyllama', messages: [{ role: 'user' as const, content }], ...extra }) as Params;

describe('gateway routing: jurisdiction and TEE', () => {
  let f: GatewayFixture;
  let ca: GatewayNode;
  let us: GatewayNode;
  let client: OpenAI;
  beforeAll(async () => {
    f = await startGatewayFixture();
    ca = await f.addNode({ country: 'CA', region: 'ca-central' });
    us = await f.addNode({ country: 'US', region: 'us-east', gpuModel: 'NVIDIA H100' });
    client = f.openai();
  });
  afterAll(() => f.close());

  const receiptOf = async (id: string) =>
    ((await f.api('GET', `/api/v1/job/receipts/${id}`)).json.receipts as Receipt[])[0];

  it('strict_jurisdiction never lands in another country: the receipt records where it ran', async () => {
    for (const country of ['CA', 'US', 'CA', 'US', 'CA', 'US', 'CA', 'US']) {
      const done = await client.chat.completions.create(ask(`pinned to ${country}`, { strict_jurisdiction: country }));
      const receipt = await receiptOf(done.id);
      expect(receipt?.metadata).toMatchObject({
        country,
        strict_jurisdiction: country,
        node_id: country === 'CA' ? ca.nodeId : us.nodeId,
      });
      expect((done as unknown as { svc_node: { country: string } }).svc_node.country).toBe(country);
    }
    const stream = await client.chat.completions.create({
      ...ask('streamed and pinned', { strict_jurisdiction: 'US' }),
      stream: true,
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect((chunks[0] as unknown as { svc_node: { node_id: string } }).svc_node.node_id).toBe(us.nodeId);
  });

  it('jurisdiction is a preference: it wins when a node is there, and the receipt records the actual country when none is', async () => {
    for (let i = 0; i < 4; i++) {
      const done = await client.chat.completions.create(ask('prefer the US', { jurisdiction: 'US' }));
      expect((await receiptOf(done.id))?.metadata).toMatchObject({ country: 'US', jurisdiction: 'US' });
    }
    const elsewhere = await client.chat.completions.create(ask('prefer Germany', { jurisdiction: 'DE' }));
    const receipt = await receiptOf(elsewhere.id);
    expect(receipt?.metadata.jurisdiction).toBe('DE');
    expect(['CA', 'US']).toContain(receipt?.metadata.country);
  });

  it('requires_tee never lands on an unverified node', async () => {
    const none = await f.api('POST', '/v1/chat/completions', ask('tee please', { requires_tee: true }));
    expect(none.status).toBe(503);
    expect(none.json.error).toMatchObject({
      code: 'no_capacity',
      message: 'no live node serves tinyllama with a verified TEE (requires_tee)',
    });
    await f.server.ctx.db.query(
      "UPDATE nodes SET attestation_verified = true, attestation_expires_at = now() + interval '1 day' WHERE id = $1",
      [us.nodeId],
    );
    // A statement on another connection: on PostgreSQL the directory hears of it over the bus.
    await f.server.ctx.nodeDirectory.caughtUp();
    try {
      for (let i = 0; i < 6; i++) {
        const done = await client.chat.completions.create(ask(`tee ${i}`, { requires_tee: true }));
        expect((await receiptOf(done.id))?.metadata).toMatchObject({ node_id: us.nodeId, requires_tee: true });
      }
      const both = await f.api(
        'POST',
        '/v1/chat/completions',
        ask('tee in CA', { requires_tee: true, strict_jurisdiction: 'CA' }),
      );
      expect((both.json.error as { message: string }).message).toBe(
        'no live node serves tinyllama in CA with a verified TEE (requires_tee)',
      );
      // The node's recorded verification rides on the receipt (docs/attestation.md); an expired one leaves the pool.
      await f.server.ctx.db.query(
        `INSERT INTO node_attestations (node_id, method, verified, measurement, tcb_status, checks, verified_at, expires_at)
         VALUES ($1, 1, true, $2, 'UpToDate', '[]', now(), now() + interval '1 day')`,
        [us.nodeId, 'ab'.repeat(48)],
      );
      const attested = await client.chat.completions.create(ask('tee attested', { requires_tee: true }));
      expect((await receiptOf(attested.id))?.metadata.attestation).toMatchObject({
        method: 'intel-tdx',
        measurement: 'ab'.repeat(48),
        tcb_status: 'UpToDate',
      });
      await f.server.ctx.db.query(
        "UPDATE nodes SET attestation_expires_at = now() - interval '1 second' WHERE id = $1",
        [us.nodeId],
      );
      await f.server.ctx.nodeDirectory.caughtUp();
      expect((await f.api('POST', '/v1/chat/completions', ask('tee expired', { requires_tee: true }))).status).toBe(
        503,
      );
    } finally {
      await f.server.ctx.db.query('UPDATE nodes SET attestation_verified = false WHERE id = $1', [us.nodeId]);
    }
  });

  it('does not route to a node that stopped calling in (not live for 30 s)', async () => {
    // The node's agent keeps running: one of its signed calls (a heartbeat) may land between the
    // UPDATE and the request and make it live again. Such a request may be routed; it is tried again.
    let status = 0;
    for (let attempt = 0; attempt < 10 && status !== 503; attempt++) {
      await f.server.ctx.db.query("UPDATE nodes SET last_seen = now() - interval '31 seconds' WHERE id = $1", [
        us.nodeId,
      ]);
      await f.server.ctx.nodeDirectory.caughtUp();
      status = (await f.api('POST', '/v1/chat/completions', ask('where', { strict_jurisdiction: 'US' }))).status;
      if (status !== 503) {
        // Routed: only because the node called in meanwhile.
        const { rows } = await f.server.ctx.db.query<{ live: boolean }>(
          "SELECT last_seen > now() - interval '30 seconds' AS live FROM nodes WHERE id = $1",
          [us.nodeId],
        );
        expect(rows[0]?.live).toBe(true);
      }
    }
    expect(status).toBe(503);
    // Its next signed call makes it live again.
    await eventually(
      async () =>
        (await f.api('POST', '/v1/chat/completions', ask('back', { strict_jurisdiction: 'US' }))).status === 200,
    );
  });
});

describe('gateway failover', () => {
  let f: GatewayFixture;
  let bad: GatewayNode;
  let good: GatewayNode;
  let client: OpenAI;
  beforeAll(async () => {
    // Short leases so that a node that never answers loses its work in seconds.
    f = await startGatewayFixture({ env: { SVC_LEASE_SECONDS: '2' } });
    bad = await f.addNode({ country: 'CA', region: 'ca-central' });
    good = await f.addNode({ country: 'US', region: 'us-east' });
    client = f.openai();
  });
  afterAll(() => f.close());

  it('a node failing before the first byte: the request is served by the second', async () => {
    bad.upstream?.setFailure({ status: 500, message: 'GPU fell off the bus', times: 1000 });
    try {
      const { data, response } = await client.chat.completions
        .create(ask('fail over please', { jurisdiction: 'CA' }))
        .withResponse();
      expect(data.choices[0]?.message.content).toBe('You said: fail over please');
      expect(response.headers.get('x-svc-node')).toBe(good.nodeId);
      const receipt = ((await f.api('GET', `/api/v1/job/receipts/${data.id}`)).json.receipts as Receipt[])[0];
      expect(receipt?.metadata).toMatchObject({ node_id: good.nodeId, country: 'US', jurisdiction: 'CA' });
      expect(bad.workEvents().at(-1)).toMatchObject({
        outcome: 'failed',
        retryable: true,
        message: 'upstream returned 500: GPU fell off the bus',
      });

      const stream = await client.chat.completions.create({
        ...ask('streamed failover', { jurisdiction: 'CA' }),
        stream: true,
      });
      const chunks = [];
      for await (const chunk of stream) chunks.push(chunk);
      expect((chunks[0] as unknown as { svc_node: { node_id: string } }).svc_node.node_id).toBe(good.nodeId);
      expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe('You said: streamed failover');
    } finally {
      bad.upstream?.setFailure(undefined);
    }
  });

  it('a final failure (the request itself is bad) is not retried: 502 upstream_error, nothing charged', async () => {
    const before = (await f.api('GET', '/api/v1/billing/balance')).json;
    bad.upstream?.setFailure({ status: 400, message: 'prompt rejected by the model', times: 1000 });
    try {
      const res = await f.api('POST', '/v1/chat/completions', ask('a bad one', { strict_jurisdiction: 'CA' }));
      expect(res.status).toBe(502);
      expect(res.json.error).toMatchObject({
        code: 'upstream_error',
        type: 'api_error',
        message: `node ${bad.nodeId} failed: prompt rejected by the model`,
      });
    } finally {
      bad.upstream?.setFailure(undefined);
    }
    const after = (await f.api('GET', '/api/v1/billing/balance')).json;
    expect(after).toMatchObject({ balance_cents: before.balance_cents, held_cents: 0 });
  });

  it('a node that never picks its work up loses the lease, and the request goes to another node', async () => {
    const silent = await createTestNode(f.server.app, f.operatorKey, {
      country: 'FR',
      region: 'eu-west',
      models: ['tinyllama'],
    });
    const started = Date.now();
    const done = await client.chat.completions.create(ask('anyone there', { jurisdiction: 'FR' }));
    expect(Date.now() - started).toBeGreaterThan(1_500);
    const receipt = ((await f.api('GET', `/api/v1/job/receipts/${done.id}`)).json.receipts as Receipt[])[0];
    expect(receipt?.metadata).toMatchObject({ jurisdiction: 'FR' });
    expect(receipt?.node_id).not.toBe(silent.nodeId);
    const { rows } = await f.server.ctx.db.query<{ node_id: string; status: string }>(
      'SELECT node_id, status FROM work_items WHERE job_id = $1 ORDER BY created_at',
      [done.id],
    );
    expect(rows.map((r) => [r.node_id === silent.nodeId, r.status])).toEqual([
      [true, 'lost'],
      [false, 'completed'],
    ]);
    // Out of the way of the next test: no longer live.
    await f.server.ctx.db.query("UPDATE nodes SET last_seen = now() - interval '1 hour' WHERE id = $1", [
      silent.nodeId,
    ]);
  });

  it('when both attempts fail the answer is 502 and the hold is released', async () => {
    bad.upstream?.setFailure({ status: 503, times: 1000 });
    good.upstream?.setFailure({ status: 503, times: 1000 });
    try {
      const res = await f.api('POST', '/v1/chat/completions', ask('nobody can'));
      expect(res.status).toBe(502);
      expect((res.json.error as { code: string }).code).toBe('upstream_error');
      expect((res.json.error as { message: string }).message).toMatch(
        /^node node_[0-9a-z]+ failed: upstream returned 503/,
      );
      expect((await f.api('GET', '/api/v1/billing/balance')).json.held_cents).toBe(0);
    } finally {
      bad.upstream?.setFailure(undefined);
      good.upstream?.setFailure(undefined);
    }
  });
});

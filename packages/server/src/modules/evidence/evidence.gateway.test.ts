import { verifyBundle } from '@svc/protocol/verify';
import { COMPLETED_REQUEST_EVENTS } from '../../../test/gateway-events.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { policyId } from './events.js';
import { startGatewayFixture, type GatewayFixture, type GatewayNode } from '../../../test/gateway-fixture.js';

interface Graph {
  run: Record<string, unknown>;
  events: { event_type: string; metadata: Record<string, unknown> }[];
  certificate: { signed: boolean; verified: boolean };
}

describe('evidence runs of gateway requests', () => {
  let f: GatewayFixture;
  let ca: GatewayNode;
  let us: GatewayNode;
  beforeAll(async () => {
    f = await startGatewayFixture();
    ca = await f.addNode({ country: 'CA', region: 'ca-central' });
    us = await f.addNode({ country: 'US', region: 'us-east' });
  });
  afterAll(() => f.close());

  const graphOf = async (id: string) => (await f.api('GET', `/api/v1/jobs/${id}/evidence`)).json as unknown as Graph;
  const bundleOf = async (id: string) => (await f.api('GET', `/api/v1/jobs/${id}/evidence/bundle`)).text;

  it('records a chat completion from routing to charge, bound to its receipt, and the bundle verifies', async () => {
    const client = f.openai();
    const done = await client.chat.completions.create({
      model: 'tinyllama',
      messages: [{ role: 'user', content: 'where am I served?' }],
      strict_jurisdiction: 'US',
    } as never);
    const graph = await graphOf(done.id);
    expect(graph.events.map((e) => e.event_type)).toEqual(COMPLETED_REQUEST_EVENTS);
    expect(graph.run).toMatchObject({
      job_id: done.id,
      subject_type: 'request',
      status: 'completed',
      work_type: 'chat',
      jurisdiction: 'US',
      trust_tier: 'public',
    });
    // No `ledger.held`: a gateway request writes no hold (DESIGN.md section 7, revised 2026-11-27).
    const routing = graph.events[2]?.metadata ?? {};
    expect(routing).toMatchObject({ node_id: us.nodeId, country: 'US', candidates: 2, eligible: 1 });
    expect(String(routing.reason)).toContain('in US (strict_jurisdiction)');
    expect(graph.events[1]?.metadata).toMatchObject({ strict_jurisdiction: 'US', model: 'tinyllama' });
    // The policy's id, hashed once for the run and its policy.evaluated event, names that policy.
    const { policy_id, decision, ...policy } = graph.events[1]?.metadata ?? {};
    expect({ policy_id, decision }).toEqual({ policy_id: policyId(policy), decision: 'accepted' });
    expect(graph.run.policy_id).toBe(policy_id);
    expect(graph.certificate).toMatchObject({ signed: true, verified: true });

    const receipts = (await f.api('GET', `/api/v1/job/receipts/${done.id}`)).json.receipts as {
      id: string;
      signature: string;
    }[];
    expect(graph.events[5]?.metadata).toMatchObject({
      receipt_id: receipts[0]?.id,
      signature: receipts[0]?.signature,
      job_id: done.id,
    });
    const keys = (await f.api('GET', '/api/v1/keys/platform')).json.keys as { public_key_hex: string }[];
    const verified = await verifyBundle(await bundleOf(done.id), { trustedKeys: keys });
    expect(verified.checks.filter((c) => !c.ok)).toEqual([]);
  });

  it('records streamed requests and failover with its reason', async () => {
    const client = f.openai();
    const stream = await client.chat.completions.create({
      model: 'tinyllama',
      messages: [{ role: 'user', content: 'stream me' }],
      stream: true,
    });
    let id = '';
    for await (const chunk of stream) id = chunk.id;
    expect((await graphOf(id)).events.at(-1)?.event_type).toBe('request.completed');

    ca.upstream?.setFailure({ status: 500, message: 'GPU fell off the bus', times: 1000 });
    us.upstream?.setFailure({ status: 500, message: 'GPU fell off the bus', times: 0 });
    try {
      const done = await client.chat.completions.create({
        model: 'tinyllama',
        messages: [{ role: 'user', content: 'fail over' }],
        jurisdiction: 'CA',
      } as never);
      const graph = await graphOf(done.id);
      const types = graph.events.map((e) => e.event_type);
      expect(types).toEqual([
        'request.received',
        'policy.evaluated',
        'routing.decided',
        'request.assigned',
        'request.failover',
        'routing.decided',
        'request.assigned',
        'receipt.submitted',
        'receipt.verified',
        'ledger.charged',
        'request.completed',
      ]);
      expect(graph.events[4]?.metadata).toMatchObject({ failed_node_id: ca.nodeId });
      expect(String(graph.events[4]?.metadata.reason)).toContain('GPU fell off the bus');
      expect(graph.events[5]?.metadata).toMatchObject({ node_id: us.nodeId, country: 'US' });
      expect(graph.events[6]?.metadata).toMatchObject({ attempt: 2 });
      expect((await verifyBundle(await bundleOf(done.id))).ok).toBe(true);
    } finally {
      ca.upstream?.setFailure(undefined);
    }
  });

  it('signs a request that failed, with nothing charged', async () => {
    ca.upstream?.setFailure({ status: 400, message: 'prompt rejected by the model', times: 1000 });
    try {
      const res = await f.api('POST', '/v1/chat/completions', {
        model: 'tinyllama',
        messages: [{ role: 'user', content: 'x' }],
        strict_jurisdiction: 'CA',
      });
      expect(res.status).toBe(502);
      const runs = (await f.api('GET', '/api/v1/evidence?limit=1')).json.runs as { job_id: string }[];
      const graph = await graphOf(runs[0]?.job_id ?? '');
      // Nothing was held, so nothing is released: no ledger event at all.
      expect(graph.events.at(-1)?.event_type).toBe('request.failed');
      expect(graph.events.filter((e) => e.event_type.startsWith('ledger.'))).toEqual([]);
      expect(graph.certificate).toMatchObject({ signed: true, verified: true });
    } finally {
      ca.upstream?.setFailure(undefined);
    }
  });
});

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKey } from '../../../test/harness.js';
import { startGatewayFixture, type GatewayFixture, type GatewayNode } from '../../../test/gateway-fixture.js';

type Structured = Record<string, unknown>;

describe('the MCP endpoint, through the official SDK client, on a real server with a real node', () => {
  let f: GatewayFixture;
  let node: GatewayNode;
  let buyer: Client;
  let readOnly: Client;
  const clients: Client[] = [];

  async function connect(apiKey: string | undefined): Promise<Client> {
    const client = new Client({ name: 'svc-test', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(`${f.server.url}/mcp`), {
      requestInit: { headers: apiKey ? { authorization: `Bearer ${apiKey}` } : {} },
    });
    await client.connect(transport);
    clients.push(client);
    return client;
  }
  const call = async (client: Client, name: string, args: Record<string, unknown> = {}) =>
    (await client.callTool({ name, arguments: args })) as CallToolResult;
  const ok = async (client: Client, name: string, args: Record<string, unknown> = {}) => {
    const res = await call(client, name, args);
    expect([name, res.isError ?? false, res.isError ? res.content : '']).toEqual([name, false, '']);
    return res.structuredContent as Structured;
  };

  beforeAll(async () => {
    f = await startGatewayFixture();
    node = await f.addNode({ country: 'CA', region: 'ca-central', gpuModel: 'NVIDIA L4' });
    buyer = await connect(f.buyer.apiKey);
    readOnly = await connect(await createKey(f.server.app, f.buyer, ['read-only'], 'mcp read-only'));
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await f.close();
  });

  it('lists every tool with an input schema and a description', async () => {
    const { tools } = await buyer.listTools();
    expect(tools.map((t) => t.name).sort()).toEqual([
      'chat',
      'embed',
      'estimate_job',
      'get_balance',
      'get_evidence',
      'get_job',
      'get_receipts',
      'list_jobs',
      'list_models',
      'submit_job',
      'verify_bundle',
    ]);
    for (const t of tools) {
      expect(t.description?.length).toBeGreaterThan(30);
      expect(t.inputSchema.type).toBe('object');
    }
    const chat = tools.find((t) => t.name === 'chat');
    expect(Object.keys(chat?.inputSchema.properties ?? {})).toEqual(
      expect.arrayContaining(['model', 'messages', 'jurisdiction', 'strict_jurisdiction', 'requires_tee']),
    );
    expect(buyer.getServerVersion()).toMatchObject({ name: 'svc' });
  });

  it('chats on a node in the asked country and returns the node, country and receipt; receipts, evidence and the verifier follow', async () => {
    const chat = await ok(buyer, 'chat', {
      model: 'tinyllama',
      messages: [{ role: 'user', content: 'hello over mcp' }],
      strict_jurisdiction: 'CA',
    });
    expect(chat).toMatchObject({
      answer: 'You said: hello over mcp',
      node_id: node.nodeId,
      country: 'CA',
      gpu_model: 'NVIDIA L4',
    });
    expect(String(chat.receipt_id)).toMatch(/^rcpt_/);
    const receipts = await ok(buyer, 'get_receipts', { id: chat.id });
    expect(receipts.receipts).toEqual([
      expect.objectContaining({ id: chat.receipt_id, job_id: chat.id, signature_version: 'SVC1' }),
    ]);
    const evidence = await ok(buyer, 'get_evidence', { id: chat.id });
    expect(evidence.certificate).toMatchObject({ signed: true, verified: true });
    const verified = await ok(buyer, 'verify_bundle', { id: chat.id });
    expect(verified.ok).toBe(true);
    // A tampered bundle fails, naming the check.
    const bundle = await f.api('GET', `/api/v1/jobs/${String(chat.id)}/evidence/bundle`);
    const tampered = JSON.parse(bundle.text) as { evidence: { events: { summary: string }[] } };
    const first = tampered.evidence.events[0];
    if (first) first.summary = 'rewritten';
    const failed = await ok(buyer, 'verify_bundle', { bundle: JSON.stringify(tampered) });
    expect(failed.ok).toBe(false);
    expect((failed.checks as { name: string; ok: boolean }[]).filter((c) => !c.ok).map((c) => c.name)).toEqual([
      'bundle_hash',
      'event_hash[1]',
      'merkle_root',
    ]);
    const resource = await buyer.readResource({ uri: `svc://jobs/${String(chat.id)}/evidence-bundle` });
    expect(JSON.parse(String((resource.contents[0] as { text: string }).text))).toMatchObject({
      type: 'svc.evidence_bundle.v1',
    });
  });

  it('embeds, estimates, submits, gets and lists jobs, lists models and reads the balance', async () => {
    const models = await ok(buyer, 'list_models');
    expect((models.data as { id: string }[]).map((m) => m.id)).toContain('tinyllama');
    const embedded = await ok(buyer, 'embed', { input: ['one', 'two'] });
    expect((embedded.data as { embedding: number[] }[]).map((d) => d.embedding.length)).toEqual([384, 384]);
    const estimate = await ok(buyer, 'estimate_job', { kind: 1, estimated_tokens: 1000 });
    expect(estimate).toMatchObject({ kind: 1, currency: 'CAD' });
    const submitted = await ok(buyer, 'submit_job', {
      kind: 1,
      budget: 0.5,
      max_price_per_unit: 0.0001,
      model: 'tinyllama',
      inline_text: 'a job from mcp',
    });
    expect(String(submitted.job_id)).toMatch(/^job_/);
    const job = await ok(buyer, 'get_job', { job_id: submitted.job_id });
    expect(job).toMatchObject({ id: submitted.job_id, kind: 1 });
    const jobs = await ok(buyer, 'list_jobs', { limit: 5 });
    expect((jobs.jobs as { id: string }[]).map((j) => j.id)).toContain(submitted.job_id);
    const balance = await ok(buyer, 'get_balance');
    expect(balance).toMatchObject({ balance_cents: expect.any(Number), held_cents: expect.any(Number) });
  });

  it('errors are MCP tool errors with the REST API error strings', async () => {
    const missing = await call(buyer, 'get_job', { job_id: 'job_00000000000000000000000000' });
    expect(missing.isError).toBe(true);
    expect(missing.structuredContent).toMatchObject({ code: 404, error: 'not_found' });
    const nowhere = await call(buyer, 'chat', {
      model: 'tinyllama',
      messages: [{ role: 'user', content: 'x' }],
      strict_jurisdiction: 'DE',
    });
    expect(nowhere.structuredContent).toMatchObject({
      code: 503,
      error: 'no_capacity',
      message: 'no live node serves tinyllama in DE',
    });
    expect(nowhere.content).toEqual([{ type: 'text', text: 'no_capacity: no live node serves tinyllama in DE' }]);
    const bad = await call(buyer, 'chat', { model: 'tinyllama', messages: [] });
    expect(bad.isError).toBe(true);
  });

  it('a read-only key can list and read but not run inference or submit jobs', async () => {
    expect(await ok(readOnly, 'get_balance')).toHaveProperty('balance_cents');
    expect(await ok(readOnly, 'list_jobs')).toHaveProperty('jobs');
    for (const [name, args] of [
      ['chat', { model: 'tinyllama', messages: [{ role: 'user', content: 'x' }] }],
      ['embed', { input: 'x' }],
      ['submit_job', { kind: 1, budget: 0.5, max_price_per_unit: 0.0001, inline_text: 'x' }],
    ] as const) {
      const refused = await call(readOnly, name, args);
      expect([name, refused.isError, (refused.structuredContent as Structured).error]).toEqual([
        name,
        true,
        'insufficient_scope',
      ]);
    }
  });

  it('401 with WWW-Authenticate without a key, 403 for a foreign Origin, 405 for GET', async () => {
    const init = {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'curl', version: '1' } },
    };
    const post = (headers: Record<string, string>) =>
      fetch(`${f.server.url}/mcp`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
        body: JSON.stringify(init),
      });
    const none = await post({});
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toMatch(/^Bearer /);
    expect((await post({ authorization: 'Bearer svc_live_nope' })).status).toBe(401);
    await expect(connect(undefined)).rejects.toThrow();
    const evil = await post({ authorization: `Bearer ${f.buyer.apiKey}`, origin: 'http://evil.example' });
    expect([evil.status, ((await evil.json()) as { error: string }).error]).toEqual([403, 'forbidden']);
    const same = await post({ authorization: `Bearer ${f.buyer.apiKey}`, origin: new URL(f.server.url).origin });
    expect(same.status).toBe(200);
    expect(((await same.json()) as { result: { protocolVersion: string } }).result.protocolVersion).toBe('2025-06-18');
    const get = await fetch(`${f.server.url}/mcp`, { headers: { authorization: `Bearer ${f.buyer.apiKey}` } });
    expect([get.status, get.headers.get('allow')]).toEqual([405, 'POST']);
  });
});

describe('an MCP tool call counts once against the rate limits', () => {
  let f: GatewayFixture;
  beforeAll(async () => {
    // Buckets that barely refill during the test, so every take shows in X-RateLimit-Remaining.
    f = await startGatewayFixture({
      env: {
        SVC_RATE_LIMIT_BURST: '8',
        SVC_RATE_LIMIT_RPS: '0.001',
        SVC_ORG_RATE_LIMIT_BURST: '8',
        SVC_ORG_RATE_LIMIT_RPS: '0.001',
      },
    });
  });
  afterAll(() => f.close());

  it('a tool call and the REST twin it runs take one token, and the inner-call header cannot be forged', async () => {
    const toolCall = (id: number, headers: Record<string, string> = {}) =>
      fetch(`${f.server.url}/mcp`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': '2025-06-18',
          authorization: `Bearer ${f.buyer.apiKey}`,
          ...headers,
        },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id,
          method: 'tools/call',
          params: { name: 'get_balance', arguments: {} },
        }),
      });
    const remaining: number[] = [];
    for (let i = 1; i <= 3; i++) {
      const res = await toolCall(i);
      const body = (await res.json()) as {
        result?: { isError?: boolean; structuredContent?: Record<string, unknown> };
      };
      expect([res.status, body.result?.isError ?? false]).toEqual([200, false]);
      expect(body.result?.structuredContent).toHaveProperty('available_cents');
      remaining.push(Number(res.headers.get('x-ratelimit-remaining')));
    }
    // Each response shows the bucket after its own take: one token per call, not two.
    expect(remaining).toEqual([7, 6, 5]);
    // A client cannot skip the limits by sending the header itself: its guess is counted like any request.
    const forged = await fetch(`${f.server.url}/api/v1/billing/balance`, {
      headers: { authorization: `Bearer ${f.buyer.apiKey}`, 'x-svc-inner-call': 'x'.repeat(32) },
    });
    expect([forged.status, forged.headers.get('x-ratelimit-remaining')]).toEqual([200, '4']);
  });
});

import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startOpenAITestServer, type OpenAITestServer } from '@svc/node-agent/testing';
import { createTestStore, svc1VerifiesIndependently, type TestStore } from '@svc/server/testing';
import { spawnSvc, until, waitForUrl, type SpawnedSvc } from './spawn.js';

/** The fields these tests read from JSON answers. */
interface ApiBody {
  [key: string]: unknown;
  job_id?: string;
  api_key?: string;
  status?: string;
  node_id?: string | null;
  attempts?: number;
  charged_cents?: number;
  balance_cents?: number;
  held_cents?: number;
  receipts?: unknown[];
  transactions?: unknown[];
  events?: { type: string }[];
}

/** A free loopback port, so a restarted server comes back where its nodes look for it. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const address = server.address();
  await new Promise<void>((r) => server.close(() => r()));
  return typeof address === 'object' && address ? address.port : 0;
}

describe('end to end with real processes: svc serve, two svc node agents, a buyer', () => {
  let store: TestStore;
  let upstream: OpenAITestServer;
  let port: number;
  let server: SpawnedSvc;
  let base: string;
  let buyerKey: string;
  let operatorKey: string;
  let operatorOwnerKey: string;
  const nodes: { proc: SpawnedSvc; dir: string; nodeId: string }[] = [];
  const serverEnv = () => ({
    SVC_DATA_DIR: store.dataDir,
    SVC_PORT: String(port),
    SVC_LEASE_SECONDS: '3',
    SVC_ALLOW_PRIVATE_EGRESS: '1',
    SVC_LOG_LEVEL: 'warn',
    ...(store.databaseUrl ? { DATABASE_URL: store.databaseUrl } : {}),
  });
  const api = async (path: string, init: { method?: string; body?: unknown; key?: string } = {}) => {
    const res = await fetch(`${base}${path}`, {
      method: init.method ?? (init.body ? 'POST' : 'GET'),
      headers: {
        authorization: `Bearer ${init.key ?? buyerKey}`,
        ...(init.body ? { 'content-type': 'application/json' } : {}),
      },
      body: init.body ? JSON.stringify(init.body) : undefined,
    });
    const text = await res.text();
    return { status: res.status, body: (text ? JSON.parse(text) : {}) as ApiBody };
  };
  const job = (id: string) => api(`/api/v1/marketplace/jobs/${id}`).then((r) => r.body);

  beforeAll(async () => {
    store = await createTestStore();
    upstream = await startOpenAITestServer();
    port = await freePort();
    server = spawnSvc(['serve'], serverEnv());
    base = await waitForUrl(server);
    const signup = async (email: string) =>
      (await (
        await fetch(`${base}/api/v1/auth/signup`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ email, password: 'end to end password' }),
        })
      ).json()) as { api_key: string; token: string };
    buyerKey = (await signup('buyer@e2e.test')).api_key;
    // the owner's session mints the node's operator key (a buyer key may not grant operator)
    operatorOwnerKey = (await signup('operator@e2e.test')).token;
    operatorKey = (
      await api('/api/v1/auth/api-keys', { body: { label: 'node', scopes: ['operator'] }, key: operatorOwnerKey })
    ).body.api_key as string;
    for (let i = 0; i < 2; i++) {
      const dir = mkdtempSync(join(tmpdir(), 'svc-e2e-node-'));
      const proc = spawnSvc(
        [
          'node',
          '--server',
          base,
          '--data-dir',
          dir,
          '--country',
          'CA',
          '--region',
          'ca-central',
          '--upstream',
          upstream.url,
          '--model',
          'tinyllama',
          '--allow-process-runner',
          '--concurrency',
          '2',
        ],
        { SVC_NODE_API_KEY: operatorKey },
      );
      const nodeId = await until(
        'node registration',
        async () => /registered (node_[a-z0-9]+)/.exec(proc.stdout())?.[1],
      );
      nodes.push({ proc, dir, nodeId });
    }
  });

  afterAll(async () => {
    for (const n of nodes) {
      n.proc.child.kill('SIGKILL');
      rmSync(n.dir, { recursive: true, force: true });
    }
    server.child.kill('SIGTERM');
    await server.exited;
    await upstream.close();
    await store.drop();
  });

  it('estimates, submits, completes; the receipt verifies independently; the buyer is charged and the operator paid', async () => {
    const estimate = await api('/api/v1/marketplace/estimate', { body: { kind: 1, estimated_tokens: 2000 } });
    expect(estimate.status).toBe(200);
    // A price high enough that the job costs whole cents: 0.01 CAD per token, at most the 1 CAD budget.
    const submit = await api('/api/v1/marketplace/jobs', {
      body: {
        kind: 1,
        budget: 1,
        max_price_per_unit: 0.01,
        currency: 'CAD',
        model: 'tinyllama',
        inline_text: 'what is a receipt?\nwho signs it?',
        strict_jurisdiction: 'CA',
      },
    });
    expect(submit.status).toBe(201);
    const id = submit.body.job_id as string;
    const done = await until('job completion', async () => {
      const j = await job(id);
      return j.status === 'completed' ? j : undefined;
    });
    expect(nodes.map((n) => n.nodeId)).toContain(done.node_id);
    const receipts = (await api(`/api/v1/jobs/${id}/receipts`)).body.receipts as {
      job_id: string;
      node_public_key: string;
      result_hash: string;
      metering_units: number;
      signature: string;
    }[];
    expect(receipts).toHaveLength(1);
    const receipt = receipts[0];
    if (!receipt) throw new Error('no receipt');
    expect(svc1VerifiesIndependently(receipt)).toBe(true);
    expect(receipt.metering_units).toBeGreaterThan(0);
    const result = await fetch(`${base}/api/v1/marketplace/jobs/${id}/result`, {
      headers: { authorization: `Bearer ${buyerKey}` },
    });
    const text = await result.text();
    expect(JSON.parse(text).results).toHaveLength(2);
    const ledger = (await api('/api/v1/billing/transactions')).body.transactions as {
      tx_type: string;
      amount_cents: number;
      ref: string;
    }[];
    // Every hold, charge and release is its own row, even a charge under a cent (docs/billing.md).
    expect(ledger.filter((t) => t.ref === id).map((t) => t.tx_type)).toEqual(['release', 'charge', 'hold']);
    const audit = (await api(`/api/v1/marketplace/jobs/${id}/audit`)).body;
    expect((audit.events ?? []).map((e) => e.type)).toEqual(
      expect.arrayContaining(['job_submitted', 'job_assigned', 'job_completed']),
    );
    expect((await api('/api/v1/billing/transactions', { key: operatorKey })).status).toBe(403); // the node's key cannot read billing
    const earnings = (await api('/api/v1/billing/transactions', { key: operatorOwnerKey })).body.transactions as {
      tx_type: string;
      ref: string;
      amount_cents: number;
    }[];
    const earned = earnings
      .filter((t) => t.ref === id && t.tx_type === 'earning')
      .reduce((a, t) => a + t.amount_cents, 0);
    expect(earned).toBe(Math.floor(((done.charged_cents ?? 0) * 8500) / 10_000));
  });

  it('a node killed with kill -9 mid-job: the job completes once on the other node and is charged once', async () => {
    const submit = await api('/api/v1/marketplace/jobs', {
      body: {
        kind: 5,
        budget: 0.5,
        max_price_per_unit: 0.0001,
        currency: 'CAD',
        runner_args: [process.execPath, '-e', 'setTimeout(() => console.log("slow work done"), 2500)'],
        timeout_seconds: 60,
      },
    });
    const id = submit.body.job_id as string;
    const first = await until('assignment', async () => {
      const j = await job(id);
      return j.node_id ? (j.node_id as string) : undefined;
    });
    const victim = nodes.find((n) => n.nodeId === first);
    if (!victim) throw new Error('assigned to an unknown node');
    victim.proc.child.kill('SIGKILL');
    await victim.proc.exited;
    const done = await until('completion elsewhere', async () => {
      const j = await job(id);
      return j.status === 'completed' ? j : undefined;
    });
    expect(done.node_id).not.toBe(first);
    expect(done.attempts).toBe(2);
    const ledger = (await api('/api/v1/billing/transactions')).body.transactions as { tx_type: string; ref: string }[];
    expect(ledger.filter((t) => t.ref === id && t.tx_type === 'charge').length).toBeLessThanOrEqual(1);
    expect((await api(`/api/v1/jobs/${id}/receipts`)).body.receipts).toHaveLength(1);
    const events = ((await api(`/api/v1/marketplace/jobs/${id}/audit`)).body.events ?? []).map((e) => e.type);
    expect(events).toEqual(expect.arrayContaining(['job_lease_lost', 'job_requeued', 'job_completed']));
  });

  it('the server killed with kill -9 mid-job and restarted: nothing is lost', async () => {
    const balanceBefore = (await api('/api/v1/billing/balance')).body;
    const submit = await api('/api/v1/marketplace/jobs', {
      body: {
        kind: 5,
        budget: 0.5,
        max_price_per_unit: 0.0001,
        currency: 'CAD',
        runner_args: [process.execPath, '-e', 'setTimeout(() => console.log("survived"), 2000)'],
        timeout_seconds: 60,
      },
    });
    const id = submit.body.job_id as string;
    await until('the job running', async () => ((await job(id)).status === 'running' ? true : undefined));
    server.child.kill('SIGKILL');
    await server.exited;
    server = spawnSvc(['serve'], serverEnv());
    base = await waitForUrl(server);
    const done = await until(
      'completion after the restart',
      async () => {
        const j = await job(id);
        return j.status === 'completed' ? j : undefined;
      },
      90_000,
    );
    expect((await api(`/api/v1/jobs/${id}/receipts`)).body.receipts).toHaveLength(1);
    const output = (await (
      await fetch(`${base}/api/v1/marketplace/jobs/${id}/result`, { headers: { authorization: `Bearer ${buyerKey}` } })
    ).json()) as { stdout: string };
    expect(output.stdout).toContain('survived');
    const balance = (await api('/api/v1/billing/balance')).body;
    expect(balance.balance_cents).toBe((balanceBefore.balance_cents ?? 0) - (done.charged_cents ?? 0));
    expect(balance.held_cents).toBe(balanceBefore.held_cents);
    // The evidence written before the crash and after it is one gap-free, signed run.
    const graph = (await api(`/api/v1/jobs/${id}/evidence`)).body as unknown as {
      events: { sequence: number; event_type: string }[];
      certificate: { verified: boolean };
    };
    expect(graph.events.map((e) => e.sequence)).toEqual(graph.events.map((_, i) => i + 1));
    expect(graph.events.map((e) => e.event_type)).toEqual(
      expect.arrayContaining([
        'job.submitted',
        'job.assigned',
        'job.started',
        'receipt.verified',
        'ledger.charged',
        'job.completed',
      ]),
    );
    expect(graph.events.at(-1)?.event_type).toBe('job.completed');
    expect(graph.certificate.verified).toBe(true);
  }, 120_000);
});

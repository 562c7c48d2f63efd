import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, createKey, createTestApp, signUp, type TestApp } from '../../../test/harness.js';
import { buildApp } from '../../app.js';
import { scopesGrant, type Permission } from '../../platform/scopes.js';

/** The stable error string of either envelope: ErrorResponse's `error`, or OpenAI's `error.code` under /v1/. */
const errorCode = (res: { json: () => { error: unknown } }) => {
  const e = res.json().error;
  return typeof e === 'object' && e !== null ? (e as { code: string }).code : e;
};

/**
 * What every route requires. A route missing here fails the test: adding a route means deciding,
 * in this table, who may call it.
 */
const EXPECTED: Record<string, Permission | 'public' | 'node' | 'authenticated'> = {
  'GET /metrics': 'public',
  'GET /openapi.json': 'public',
  'GET /api/v1/health': 'public',
  'GET /api/v1/config': 'config:read',
  'GET /api/v1/inference/health': 'models:read',
  'GET /api/v1/downloads': 'public',
  'GET /api/v1/downloads/:file': 'public',
  'GET /api/v1/keys/platform': 'public',
  // The transparency log's hashes are public (DESIGN.md section 17); an inclusion proof names a
  // run, so it answers the run's own tenant.
  'GET /api/v1/log/checkpoint': 'public',
  'GET /api/v1/log/tile/*': 'public',
  'GET /api/v1/log/proof/consistency': 'public',
  'GET /api/v1/log/proof/inclusion': 'evidence:read',
  'POST /api/v1/auth/signup': 'public',
  'POST /api/v1/auth/login': 'public',
  'POST /api/v1/auth/logout': 'account:read',
  'GET /api/v1/auth/me': 'account:read',
  'POST /api/v1/auth/api-keys': 'keys:write',
  'GET /api/v1/auth/api-keys': 'keys:read',
  'POST /api/v1/auth/api-keys/:key_id/revoke': 'keys:write',
  'GET /api/v1/organizations/current': 'organization:read',
  'GET /api/v1/organizations/current/members': 'organization:read',
  'POST /api/v1/organizations/current/invites': 'organization:write',
  'POST /api/v1/organizations/invites/accept': 'public',
  'PATCH /api/v1/organizations/current/members/:buyer_id': 'organization:write',
  'DELETE /api/v1/organizations/current/members/:buyer_id': 'organization:write',
  'POST /api/v1/node/register': 'nodes:write',
  'GET /api/v1/node/work': 'node',
  'GET /api/v1/node/channel': 'node',
  'POST /api/v1/node/heartbeat': 'node',
  'POST /api/v1/node/attestation/challenge': 'node',
  'POST /api/v1/node/attestation': 'node',
  'POST /api/v1/node/work/:work_id/result': 'node',
  'POST /api/v1/node/work/:work_id/fail': 'node',
  'POST /api/v1/node/work/:work_id/outputs': 'node',
  'GET /api/v1/jobs/:job/evidence': 'evidence:read',
  'GET /api/v1/jobs/:job/evidence/bundle': 'evidence:read',
  'GET /api/v1/evidence': 'evidence:read',
  'POST /api/v1/node/receipt': 'node',
  'GET /api/v1/nodes': 'nodes:read',
  'GET /api/v1/nodes/earnings': 'payouts:read',
  'POST /api/v1/marketplace/estimate': 'jobs:read',
  'GET /api/v1/marketplace/pricing': 'models:read',
  'POST /api/v1/marketplace/jobs': 'jobs:write',
  'GET /api/v1/marketplace/jobs': 'jobs:read',
  'GET /api/v1/marketplace/jobs/:id': 'jobs:read',
  'POST /api/v1/marketplace/jobs/:id/cancel': 'jobs:write',
  'GET /api/v1/marketplace/jobs/:id/audit': 'jobs:read',
  'GET /api/v1/marketplace/jobs/:id/result': 'jobs:read',
  'GET /api/v1/marketplace/sla': 'jobs:read',
  'GET /api/v1/jobs/:job/receipts': 'receipts:read',
  'GET /api/v1/job/receipts/:job': 'receipts:read',
  'GET /api/v1/audit/receipts': 'receipts:read',
  'GET /api/v1/billing/balance': 'billing:read',
  'GET /api/v1/billing/transactions': 'billing:read',
  'GET /api/v1/billing/spend': 'billing:read',
  'GET /v1/models': 'models:read',
  'POST /v1/chat/completions': 'inference:write',
  'POST /v1/embeddings': 'inference:write',
  'POST /v1/audio/transcriptions': 'inference:write',
  'POST /v1/images/generations': 'inference:write',
  'GET /v1/files/:name': 'public',
  'GET /api/v1/gateway/requests': 'jobs:read',
  'GET /api/v1/gateway/requests/:id': 'jobs:read',
  'POST /api/v1/node/work/:work_id/events': 'node',
  'POST /mcp': 'authenticated',
  'GET /mcp': 'authenticated',
  'DELETE /mcp': 'authenticated',
  'POST /api/v1/knowledge-bases': 'knowledge_bases:write',
  'GET /api/v1/knowledge-bases': 'knowledge_bases:read',
  'GET /api/v1/knowledge-bases/:id': 'knowledge_bases:read',
  'DELETE /api/v1/knowledge-bases/:id': 'knowledge_bases:write',
  'POST /api/v1/knowledge-bases/:id/documents': 'documents:write',
  'GET /api/v1/knowledge-bases/:id/documents': 'knowledge_bases:read',
  'GET /api/v1/knowledge-bases/:id/documents/:document_id': 'knowledge_bases:read',
  'DELETE /api/v1/knowledge-bases/:id/documents/:document_id': 'knowledge_bases:write',
  'POST /api/v1/knowledge-bases/:id/search': 'knowledge_bases:read',
  'POST /api/v1/node/connect': 'payouts:write',
  'POST /api/v1/node/connect/onboarding': 'payouts:write',
  'GET /api/v1/node/connect/status': 'payouts:read',
  'GET /api/v1/payouts': 'payouts:read',
  'POST /api/v1/billing/topups': 'billing:write',
  'GET /api/v1/billing/topups': 'billing:read',
  'GET /api/v1/billing/topups/:id': 'billing:read',
  'POST /api/v1/webhooks/payments/:provider': 'public',
  'POST /api/v1/work/repositories': 'jobs:write',
  'GET /api/v1/work/repositories': 'jobs:read',
  'GET /api/v1/work/repositories/:id': 'jobs:read',
  'DELETE /api/v1/work/repositories/:id': 'jobs:write',
  'POST /api/v1/work/repositories/:id/preflight': 'jobs:write',
  'POST /api/v1/work/orders': 'jobs:write',
  'GET /api/v1/work/orders': 'jobs:read',
  'GET /api/v1/work/orders/:id': 'jobs:read',
  'POST /api/v1/work/orders/:id/approve': 'jobs:write',
  'POST /api/v1/work/orders/:id/reject': 'jobs:write',
  'POST /api/v1/work/orders/:id/rollback': 'jobs:write',
  'GET /api/v1/work/orders/:id/diff': 'jobs:read',
  'GET /api/v1/work/orders/:id/evidence': 'evidence:read',
  'GET /api/v1/work/orders/:id/evidence/bundle': 'evidence:read',
  'POST /api/v1/sites': 'capture_sets:write',
  'GET /api/v1/sites': 'capture_sets:read',
  'GET /api/v1/sites/:id': 'capture_sets:read',
  'PATCH /api/v1/sites/:id': 'capture_sets:write',
  'DELETE /api/v1/sites/:id': 'capture_sets:write',
  'POST /api/v1/sites/:site_id/epochs': 'capture_sets:write',
  'GET /api/v1/sites/:site_id/epochs': 'capture_sets:read',
  'GET /api/v1/epochs/:id': 'capture_sets:read',
  'GET /api/v1/epochs/:id/capture-sets': 'capture_sets:read',
  'POST /api/v1/capture-sets': 'capture_sets:write',
  'GET /api/v1/capture-sets/:id': 'capture_sets:read',
  'POST /api/v1/capture-sets/:id/complete': 'capture_sets:write',
  'POST /api/v1/capture-sets/:id/uploads': 'capture_sets:write',
  'PATCH /api/v1/capture-sets/:id/uploads/:upload_id': 'capture_sets:write',
  'GET /api/v1/objects/:key': 'public',
  'PUT /api/v1/objects/:key': 'public',
};

const SCOPES = ['buyer', 'read-only', 'write-only', 'buyer:read', 'operator', 'jobs:read'];

describe('access control over every route', () => {
  let t: TestApp;
  const keys: Record<string, string> = {};
  beforeAll(async () => {
    t = await createTestApp({
      env: { SVC_RATE_LIMIT_BURST: '100000', SVC_ORG_RATE_LIMIT_BURST: '100000', SVC_ANON_RATE_LIMIT_BURST: '100000' },
    });
    const owner = await signUp(t.app);
    for (const scope of SCOPES) keys[scope] = await createKey(t.app, owner, [scope], scope);
  });
  afterAll(() => t.close());

  const routes = () => t.app.routeTable.filter((r) => !r.hidden && r.method !== 'HEAD');
  const urlOf = (pattern: string) =>
    pattern
      .replace(/:key_id/, 'abc123')
      .replace(/:work_id/, 'wrk_00000000000000000000000000')
      .replace(/:id/, 'job_00000000000000000000000000')
      .replace(/:buyer_id/, 'buy_00000000000000000000000000')
      .replace(/:[a-z_]+/g, 'x');

  it('has a decision in the table for every registered route, and no stale entries', () => {
    const registered = routes().map((r) => `${r.method} ${r.url}`);
    expect(registered.filter((r) => !(r in EXPECTED))).toEqual([]);
    expect(Object.keys(EXPECTED).filter((r) => !registered.includes(r))).toEqual([]);
    for (const r of routes()) {
      const declared =
        r.auth &&
        ('public' in r.auth
          ? 'public'
          : 'node' in r.auth
            ? 'node'
            : 'authenticated' in r.auth
              ? 'authenticated'
              : r.auth.permission);
      expect(`${r.method} ${r.url} -> ${declared}`).toBe(`${r.method} ${r.url} -> ${EXPECTED[`${r.method} ${r.url}`]}`);
    }
  });

  it('refuses to build an app with a route that declares no access rule', async () => {
    await expect(
      buildApp(t.ctx, {
        extraRoutes(app) {
          app.get('/api/v1/undeclared', async () => ({}));
        },
      }),
    ).rejects.toThrow(/does not declare config.auth/);
  });

  it('answers 401 without a credential and with a wrong one on every protected route, and lets public routes through', async () => {
    for (const r of routes()) {
      const expected = EXPECTED[`${r.method} ${r.url}`];
      const none = await t.app.inject({
        method: r.method as 'GET',
        url: urlOf(r.url),
        payload: r.method === 'GET' ? undefined : {},
      });
      const wrong = await t.app.inject({
        method: r.method as 'GET',
        url: urlOf(r.url),
        headers: bearer(`svc_live_${'a'.repeat(20)}_${'0'.repeat(64)}`),
        payload: r.method === 'GET' ? undefined : {},
      });
      if (expected === 'public') {
        expect([none.statusCode, `${r.method} ${r.url}`]).not.toEqual([401, `${r.method} ${r.url}`]);
      } else {
        expect(`${r.method} ${r.url}: ${none.statusCode} ${errorCode(none)}`).toBe(
          `${r.method} ${r.url}: 401 unauthorized`,
        );
        expect(`${r.method} ${r.url}: ${wrong.statusCode}`).toBe(`${r.method} ${r.url}: 401`);
      }
    }
  });

  it('answers 403 insufficient_scope exactly where a scope does not grant the route, and never 401/403 where it does', async () => {
    for (const r of routes()) {
      const expected = EXPECTED[`${r.method} ${r.url}`];
      if (expected === 'public' || expected === undefined) continue;
      if (expected === 'node') {
        // Node routes take node signatures only: an API key of any scope is not enough.
        const res = await t.app.inject({
          method: r.method as 'GET',
          url: urlOf(r.url),
          headers: bearer(keys.operator ?? ''),
          payload: r.method === 'GET' ? undefined : {},
        });
        expect(`${r.method} ${r.url}: ${res.statusCode}`).toBe(`${r.method} ${r.url}: 401`);
        continue;
      }
      for (const scope of SCOPES) {
        const key = keys[scope] ?? '';
        const res = await t.app.inject({
          method: r.method as 'GET',
          url: urlOf(r.url),
          headers: bearer(key),
          payload: r.method === 'GET' ? undefined : {},
        });
        const label = `${scope} -> ${r.method} ${r.url}`;
        if (expected === 'authenticated' || scopesGrant([scope], expected)) {
          expect(`${label}: ${[401, 403].includes(res.statusCode) ? `refused ${res.body}` : 'allowed'}`).toBe(
            `${label}: allowed`,
          );
        } else {
          expect(`${label}: ${res.statusCode} ${errorCode(res)}`).toBe(`${label}: 403 insufficient_scope`);
        }
      }
    }
  });
});

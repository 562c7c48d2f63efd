import SwaggerParser from '@apidevtools/swagger-parser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../../test/harness.js';

/** Routes deliberately left out of the document: the docs page's own assets and the dashboard's static files. */
// HTML pages, not API operations: the docs viewer, the dashboard, and the local payment provider's pages.
const UNDOCUMENTED = [/^\/docs(\/|$)/, /^\/$/, /^\/assets\//, /^\/pay\/local\//];

/**
 * Every schema name the API reference (api-spec.md, parts 2 and 4) gives, copied here: a client
 * generated from /openapi.json must name its types after these.
 */
const SPEC_SCHEMA_NAMES = [
  // Part 2: marketplace, nodes, billing, audit, SLA, estimate
  'MarketplaceJob',
  'NodeSummary',
  'NodeRegisterRequest',
  'NodeReceiptRequest',
  'CreditTransaction',
  'MarketplaceAuditResponse',
  'MarketplaceSLAResponse',
  'EstimateRequest',
  'EstimateResponse',
  // Evidence
  'EvidenceRun',
  'EvidenceEvent',
  'EvidenceEdge',
  'EvidenceCertificate',
  'EvidenceGraphResponse',
  'EvidenceBundleResponse',
  'EvidenceRunsResponse',
  // Accounts
  'AuthRequest',
  'AuthResponse',
  'MeResponse',
  'OrganizationContext',
  'Organization',
  'OrganizationMember',
  'OrganizationMembersResponse',
  'OrganizationResponse',
  'OrganizationInviteRequest',
  'OrganizationInviteResponse',
  'OrganizationAcceptInviteRequest',
  'APIKeyCreateRequest',
  'APIKeyCreateResponse',
  'APIKeyRecord',
  'APIKeyListResponse',
  'APIKeyRevokeRequest',
  'MessageResponse',
  // Payout onboarding
  'NodeConnectCreateRequest',
  'NodeConnectCreateResponse',
  'NodeConnectOnboardingRequest',
  'NodeConnectOnboardingResponse',
  'NodeConnectStatusResponse',
  // Capture sets (Site and SiteEpoch are named, their fields "not shown")
  'CaptureSetCreateRequest',
  'CaptureSetCompleteRequest',
  'CaptureSetResponse',
  'CaptureSetListResponse',
  'Site',
  'SiteEpoch',
  // Work orders and repositories
  'CreateWorkOrderRequest',
  'CreateWorkRepositoryRequest',
  'PreflightWorkRepositoryRequest',
  'PreflightWorkRepositoryResponse',
  'WorkRepositoryConnection',
  // Other
  'ConfigResponse',
  'HealthResponse',
  'InferenceHealthResponse',
  'DownloadsInfoResponse',
  'ErrorResponse',
];

/**
 * Spec names no operation reaches, with the reason. Empty: every spec schema is the body or the
 * answer of a route, or a part of one (OrganizationContext in AuthResponse, EvidenceEvent in
 * EvidenceGraphResponse).
 */
const NOT_ROUTED: Record<string, string> = {};

/** The component names reachable by `$ref` from the operations, directly or through other components. */
function reachableComponents(doc: { paths: object; components: { schemas: Record<string, unknown> } }): Set<string> {
  const refsIn = (value: unknown): string[] =>
    [...JSON.stringify(value).matchAll(/"\$ref":"#\/components\/schemas\/([^"]+)"/g)].map((m) => m[1] ?? '');
  const seen = new Set<string>();
  const queue = refsIn(doc.paths);
  for (let name = queue.pop(); name !== undefined; name = queue.pop()) {
    if (seen.has(name)) continue;
    seen.add(name);
    queue.push(...refsIn(doc.components.schemas[name]));
  }
  return seen;
}

describe('the OpenAPI document', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

  it('is valid OpenAPI 3.0.3', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/openapi.json' });
    expect(res.statusCode).toBe(200);
    const doc = res.json();
    expect(doc.openapi).toBe('3.0.3');
    await expect(SwaggerParser.validate(structuredClone(doc))).resolves.toBeTruthy();
  });

  it('documents every registered route', async () => {
    const doc = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json() as {
      paths: Record<string, Record<string, unknown>>;
    };
    const registered = t.app.routeTable;
    const missing = registered
      .filter((r) => !UNDOCUMENTED.some((re) => re.test(r.url)) && r.method !== 'HEAD')
      // A wildcard (`/api/v1/log/tile/*`) is documented as `{*}`, as @fastify/swagger writes it.
      .filter(
        (r) => !doc.paths[r.url.replace(/:([A-Za-z_]+)/g, '{$1}').replace(/\*$/, '{*}')]?.[r.method.toLowerCase()],
      );
    expect(registered.length).toBeGreaterThan(5);
    expect(missing).toEqual([]);
  });

  it('gives every operation the error response shape and marks public routes as needing no key', async () => {
    const doc = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json();
    const health = doc.paths['/api/v1/health'].get;
    expect(health.security).toEqual([]);
    expect(health.responses['4XX'].content['application/json'].schema.$ref).toBe('#/components/schemas/ErrorResponse');
    expect(
      doc.components.schemas.ErrorResponse.properties.error.anyOf ??
        doc.components.schemas.ErrorResponse.properties.error.enum,
    ).toBeTruthy();
  });

  it('names every schema of the API reference as a component that the routes use (not inlined)', async () => {
    const doc = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json();
    expect(SPEC_SCHEMA_NAMES).toHaveLength(54);
    const components = Object.keys(doc.components.schemas);
    expect(SPEC_SCHEMA_NAMES.filter((name) => !components.includes(name))).toEqual([]);
    const reachable = reachableComponents(doc);
    expect(SPEC_SCHEMA_NAMES.filter((name) => !reachable.has(name) && !(name in NOT_ROUTED))).toEqual([]);
    // The operations refer to the named components: sign-up's body and answer, the SLA, the node's bodies.
    const json = (op: { requestBody?: unknown; responses: Record<string, unknown> }, status?: string) =>
      ((status ? op.responses[status] : op.requestBody) as { content: { 'application/json': { schema: unknown } } })
        .content['application/json'].schema;
    const signup = doc.paths['/api/v1/auth/signup'].post;
    expect(json(signup)).toEqual({ $ref: '#/components/schemas/AuthRequest' });
    expect(json(signup, '201')).toEqual({ $ref: '#/components/schemas/AuthResponse' });
    expect(json(doc.paths['/api/v1/marketplace/sla'].get, '200')).toEqual({
      $ref: '#/components/schemas/MarketplaceSLAResponse',
    });
    expect(json(doc.paths['/api/v1/node/register'].post)).toEqual({
      $ref: '#/components/schemas/NodeRegisterRequest',
    });
    expect(json(doc.paths['/api/v1/node/receipt'].post)).toEqual({ $ref: '#/components/schemas/NodeReceiptRequest' });
    expect(doc.components.schemas.AuthRequest.required).toEqual(['email', 'password']);
    expect(doc.components.schemas.MarketplaceSLAResponse.properties.assignment.required).toContain('p95_latency_ms');
  });

  it('renders at /docs', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/docs/' });
    expect(res.statusCode).toBe(200);
    expect(res.body).toContain('swagger-ui');
  });
});

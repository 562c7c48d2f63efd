import { readFileSync } from 'node:fs';
import type { Static, TSchema } from '@sinclair/typebox';
import * as rest from '@svc/protocol/rest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type * as dashboard from '../../../../dashboard/src/types.js';
import { bearer, createTestApp, signUp, type TestApp } from '../../../test/harness.js';
import { AuthResponse, type RoleSchema } from '../auth/schemas.js';
import { BillingBalanceResponse, CreditTransaction, SpendResponse } from '../billing/schemas.js';
import { EvidenceEvent, EvidenceGraphResponse } from '../evidence/schemas.js';
import { GatewayRequestRecord } from '../gateway/requests.js';
import { ModelList } from '../gateway/schemas.js';
import { AuditResponse, MarketplaceJob, MarketplaceSLAResponse } from '../jobs/schemas.js';
import type { JobStatus } from '../jobs/states.js';
import { APIKeyRecord } from '../keys/schemas.js';
import { NodeEarningsResponse, NodeSummary } from '../nodes/schemas.js';
import { OrganizationInviteResponse, OrganizationMember } from '../organizations/schemas.js';
import { NodeConnectStatusResponse, Payout, PayoutListResponse, Topup } from '../payouts/schemas.js';
import { DownloadsInfoResponse } from '../system/download-schemas.js';
import { ConfigResponse, InferenceHealthResponse, PlatformKeysResponse } from '../system/schemas.js';

/**
 * The dashboard reads the server's answers through types that are aliases of the very schemas the
 * routes validate and serialize with (`@svc/protocol/rest`). The type-level checks fail
 * `npm run typecheck` when a dashboard type and a route schema drift apart (ApiKeyRecord once
 * lacked hash_alg, Job's status was any string); the runtime ones hold the `$id` names and the
 * job states the API accepts.
 */
type Equal<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;
const same = <T extends true>(): T | undefined => undefined;

same<Equal<dashboard.Role, Static<typeof RoleSchema>>>();
same<Equal<dashboard.AuthResponse, Static<typeof AuthResponse>>>();
same<Equal<dashboard.ApiKeyRecord, Static<typeof APIKeyRecord>>>();
same<Equal<dashboard.Member, Static<typeof OrganizationMember>>>();
same<Equal<dashboard.InviteResponse, Static<typeof OrganizationInviteResponse>>>();
same<Equal<dashboard.Balance, Static<typeof BillingBalanceResponse>>>();
same<Equal<dashboard.Transaction, Static<typeof CreditTransaction>>>();
same<Equal<dashboard.SpendSeries, Static<typeof SpendResponse>>>();
same<Equal<dashboard.Job, Static<typeof MarketplaceJob>>>();
same<Equal<dashboard.JobStatus, JobStatus>>();
same<Equal<(typeof rest.JOB_STATUSES)[number], JobStatus>>();
same<Equal<dashboard.JobAudit, Static<typeof AuditResponse>>>();
same<Equal<dashboard.JobAudit['credit_ledger'][number], dashboard.Transaction>>();
same<Equal<dashboard.GatewayRequest, Static<typeof GatewayRequestRecord>>>();
same<Equal<dashboard.NodeSummary, Static<typeof NodeSummary>>>();
same<Equal<dashboard.NodeEarnings, Static<typeof NodeEarningsResponse>>>();
same<Equal<dashboard.InferenceHealth, Static<typeof InferenceHealthResponse>>>();
same<Equal<dashboard.Sla, Static<typeof MarketplaceSLAResponse>>>();
same<Equal<dashboard.Model, Static<typeof ModelList>['data'][number]>>();
same<Equal<dashboard.ServiceConfig, Static<typeof ConfigResponse>>>();
same<Equal<dashboard.DownloadsInfo, Static<typeof DownloadsInfoResponse>>>();
same<Equal<dashboard.EvidenceEvent, Static<typeof EvidenceEvent>>>();
same<Equal<dashboard.EvidenceGraph, Static<typeof EvidenceGraphResponse>>>();
same<Equal<dashboard.PlatformKey, Static<typeof PlatformKeysResponse>['keys'][number]>>();
same<Equal<dashboard.PayoutAccountStatus, Static<typeof NodeConnectStatusResponse>>>();
same<Equal<dashboard.Payout, Static<typeof Payout>>>();
same<Equal<dashboard.PayoutList, Static<typeof PayoutListResponse>>>();
same<Equal<dashboard.Topup, Static<typeof Topup>>>();

describe('REST shapes: one definition for the server and the dashboard', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

  it('each route schema the dashboard reads is the protocol schema itself, under the $id the server registers', () => {
    const pairs: [TSchema, TSchema, string][] = [
      [AuthResponse, rest.AuthResponseSchema, 'AuthResponse'],
      [APIKeyRecord, rest.APIKeyRecordSchema, 'APIKeyRecord'],
      [OrganizationMember, rest.OrganizationMemberSchema, 'OrganizationMember'],
      [OrganizationInviteResponse, rest.OrganizationInviteResponseSchema, 'OrganizationInviteResponse'],
      [BillingBalanceResponse, rest.BillingBalanceResponseSchema, 'BillingBalanceResponse'],
      [CreditTransaction, rest.CreditTransactionSchema, 'CreditTransaction'],
      [SpendResponse, rest.SpendResponseSchema, 'SpendResponse'],
      [MarketplaceJob, rest.MarketplaceJobSchema, 'MarketplaceJob'],
      [AuditResponse, rest.AuditResponseSchema, 'MarketplaceAuditResponse'],
      [MarketplaceSLAResponse, rest.MarketplaceSLAResponseSchema, 'MarketplaceSLAResponse'],
      [GatewayRequestRecord, rest.GatewayRequestRecordSchema, 'GatewayRequestRecord'],
      [ModelList, rest.ModelListSchema, 'ModelList'],
      [NodeSummary, rest.NodeSummarySchema, 'NodeSummary'],
      [NodeEarningsResponse, rest.NodeEarningsResponseSchema, 'NodeEarningsResponse'],
      [ConfigResponse, rest.ConfigResponseSchema, 'ConfigResponse'],
      [InferenceHealthResponse, rest.InferenceHealthResponseSchema, 'InferenceHealthResponse'],
      [PlatformKeysResponse, rest.PlatformKeysResponseSchema, 'PlatformKeysResponse'],
      [DownloadsInfoResponse, rest.DownloadsInfoResponseSchema, 'DownloadsInfoResponse'],
      [EvidenceEvent, rest.EvidenceEventSchema, 'EvidenceEvent'],
      [EvidenceGraphResponse, rest.EvidenceGraphResponseSchema, 'EvidenceGraphResponse'],
      [NodeConnectStatusResponse, rest.NodeConnectStatusResponseSchema, 'NodeConnectStatusResponse'],
      [Payout, rest.PayoutSchema, 'Payout'],
      [PayoutListResponse, rest.PayoutListResponseSchema, 'PayoutListResponse'],
      [Topup, rest.TopupSchema, 'Topup'],
    ];
    for (const [server, protocol, id] of pairs) {
      expect(server).toBe(protocol);
      expect(server.$id).toBe(id);
    }
  });

  it("the job statuses the dashboard filters by are the job schema's enum, as served and as accepted", async () => {
    expect([...rest.JOB_STATUSES]).toEqual([
      'submitted',
      'pending',
      'assigned',
      'running',
      'completed',
      'failed',
      'cancelled',
    ]);
    const doc = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json() as {
      components: { schemas: Record<string, { properties: Record<string, { enum?: string[] }> }> };
    };
    expect(doc.components.schemas.MarketplaceJob?.properties.status?.enum).toEqual([...rest.JOB_STATUSES]);
    const buyer = await signUp(t.app);
    for (const status of [...rest.JOB_STATUSES, 'bogus']) {
      const res = await t.app.inject({
        method: 'GET',
        url: `/api/v1/marketplace/jobs?status=${status}`,
        headers: bearer(buyer.apiKey),
      });
      expect([status, res.statusCode]).toEqual([status, status === 'bogus' ? 400 : 200]);
    }
  });

  it("the dashboard's types.ts declares no shape of its own: only aliases of protocol's schemas", () => {
    const source = readFileSync(new URL('../../../../dashboard/src/types.ts', import.meta.url), 'utf8');
    const exported = source.split('\n').filter((line) => line.startsWith('export '));
    expect(exported.length).toBeGreaterThan(20);
    for (const line of exported)
      expect(line).toMatch(/^export type \w+ = (Static<typeof \w+Schema>|StoredReceipt;|Job\[)/);
    expect(source).not.toMatch(/\binterface\b/);
  });
});

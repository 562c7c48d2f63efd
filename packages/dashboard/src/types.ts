/**
 * The API's answers the dashboard reads: aliases of the server's own route schemas, defined once in
 * `@svc/protocol/rest` (browser-safe: TypeBox only). Type-only imports: no schema code in the bundle
 * except where a page needs a value (JOB_STATUSES).
 */

import type { StoredReceipt } from '@svc/protocol';
import type {
  APIKeyRecordSchema,
  AuthResponseSchema,
  BillingBalanceResponseSchema,
  ConfigResponseSchema,
  CreditTransactionSchema,
  DownloadsInfoResponseSchema,
  EvidenceEventSchema,
  EvidenceGraphResponseSchema,
  GatewayRequestRecordSchema,
  InferenceHealthResponseSchema,
  AuditResponseSchema,
  MarketplaceJobSchema,
  MarketplaceSLAResponseSchema,
  ModelListSchema,
  NodeConnectStatusResponseSchema,
  NodeEarningsResponseSchema,
  NodeSummarySchema,
  OrganizationInviteResponseSchema,
  OrganizationMemberSchema,
  PayoutListResponseSchema,
  PayoutSchema,
  PlatformKeysResponseSchema,
  RoleSchema,
  SpendResponseSchema,
  Static,
  TopupSchema,
} from '@svc/protocol/rest';

export type Role = Static<typeof RoleSchema>;
export type AuthResponse = Static<typeof AuthResponseSchema>;
export type ApiKeyRecord = Static<typeof APIKeyRecordSchema>;
export type Member = Static<typeof OrganizationMemberSchema>;
export type InviteResponse = Static<typeof OrganizationInviteResponseSchema>;
export type Balance = Static<typeof BillingBalanceResponseSchema>;
export type Transaction = Static<typeof CreditTransactionSchema>;
export type SpendSeries = Static<typeof SpendResponseSchema>;
export type Job = Static<typeof MarketplaceJobSchema>;
export type JobStatus = Job['status'];
export type JobAudit = Static<typeof AuditResponseSchema>;
/** A stored receipt: the node protocol's one shape. */
export type Receipt = StoredReceipt;
export type GatewayRequest = Static<typeof GatewayRequestRecordSchema>;
export type NodeSummary = Static<typeof NodeSummarySchema>;
export type NodeEarnings = Static<typeof NodeEarningsResponseSchema>;
export type InferenceHealth = Static<typeof InferenceHealthResponseSchema>;
export type Sla = Static<typeof MarketplaceSLAResponseSchema>;
export type Model = Static<typeof ModelListSchema>['data'][number];
export type ServiceConfig = Static<typeof ConfigResponseSchema>;
export type DownloadsInfo = Static<typeof DownloadsInfoResponseSchema>;
export type EvidenceEvent = Static<typeof EvidenceEventSchema>;
export type EvidenceGraph = Static<typeof EvidenceGraphResponseSchema>;
export type PlatformKey = Static<typeof PlatformKeysResponseSchema>['keys'][number];
export type PayoutAccountStatus = Static<typeof NodeConnectStatusResponseSchema>;
export type Payout = Static<typeof PayoutSchema>;
export type PayoutList = Static<typeof PayoutListResponseSchema>;
export type Topup = Static<typeof TopupSchema>;

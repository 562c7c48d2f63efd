import { Type } from '@sinclair/typebox';
import { StringEnum } from '../../platform/schemas.js';
import { Email } from '../auth/schemas.js';
import {
  NodeConnectStatusResponseSchema,
  PayoutSchema,
  PayoutListResponseSchema,
  TopupSchema,
  TopupListResponseSchema,
} from '@svc/protocol/rest';

/** Shapes the dashboard reads too: defined once in `@svc/protocol/rest`, named here as the routes use them. */
export const NodeConnectStatusResponse = NodeConnectStatusResponseSchema;
export const Payout = PayoutSchema;
export const PayoutListResponse = PayoutListResponseSchema;
export const Topup = TopupSchema;
export const TopupListResponse = TopupListResponseSchema;

const Country = Type.String({ pattern: '^[A-Z]{2}$', description: 'ISO 3166-1 alpha-2, upper case' });
const AccountId = Type.String({ minLength: 1, maxLength: 100, pattern: '^[A-Za-z0-9_]+$' });

export const NodeConnectCreateRequest = Type.Object(
  { email: Email, country: Country },
  { $id: 'NodeConnectCreateRequest', additionalProperties: false },
);
export const NodeConnectCreateResponse = Type.Object(
  { account_id: Type.String(), provider: Type.String(), onboarded: Type.Boolean() },
  { $id: 'NodeConnectCreateResponse' },
);
export const NodeConnectOnboardingRequest = Type.Object(
  { account_id: AccountId },
  { $id: 'NodeConnectOnboardingRequest', additionalProperties: false },
);
export const NodeConnectOnboardingResponse = Type.Object(
  { url: Type.String({ description: "the provider's onboarding page (single use; ask again for a fresh one)" }) },
  { $id: 'NodeConnectOnboardingResponse' },
);
export const PageQuery = Type.Object({
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
  offset: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000_000, default: 0 })),
});

export const TopupCreateRequest = Type.Object(
  { amount_cents: Type.Integer({ description: 'whole cents of CAD credit to buy' }) },
  { additionalProperties: false },
);
export const IdParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 100 }) });
export const ProviderParams = Type.Object({ provider: Type.String({ minLength: 1, maxLength: 40 }) });
export const WebhookResponse = Type.Object({
  received: Type.Boolean(),
  outcome: StringEnum(['applied', 'duplicate', 'ignored'] as const),
});

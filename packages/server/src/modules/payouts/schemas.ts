import { Type } from '@sinclair/typebox';
import { StringEnum } from '../../platform/schemas.js';
import { Email } from '../auth/schemas.js';

const DateTime = Type.String({ format: 'date-time' });
const Nullable = <T extends ReturnType<typeof Type.String>>(t: T) => Type.Union([t, Type.Null()]);
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
export const NodeConnectStatusResponse = Type.Object(
  {
    account_id: Nullable(Type.String({ description: 'null until POST /api/v1/node/connect' })),
    onboarded: Type.Boolean(),
    provider: Type.String({ description: '`stripe`, or `local` (moves no real money)' }),
    moves_real_money: Type.Boolean(),
  },
  { $id: 'NodeConnectStatusResponse' },
);

export const Payout = Type.Object(
  {
    id: Type.String(),
    amount_cents: Type.Integer(),
    amount: Type.Number({ description: 'CAD' }),
    currency: Type.Literal('CAD'),
    status: StringEnum(['pending', 'paid', 'failed'] as const),
    period_start: DateTime,
    period_end: DateTime,
    provider: Type.String(),
    provider_ref: Nullable(Type.String({ description: "the provider's transfer id" })),
    failure_reason: Nullable(Type.String()),
    created_at: DateTime,
  },
  { $id: 'Payout' },
);

export const PageQuery = Type.Object({
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
  offset: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000_000, default: 0 })),
});

export const PayoutListResponse = Type.Object(
  {
    payouts: Type.Array(Type.Ref(Payout), { description: 'newest first' }),
    total: Type.Integer(),
    limit: Type.Integer(),
    offset: Type.Integer(),
    payable_cents: Type.Integer({ description: 'what the next payout run would pay now (before the minimum)' }),
    minimum_cents: Type.Integer({ description: 'payable earnings below this wait for a later run' }),
    provider: Type.String(),
    moves_real_money: Type.Boolean(),
  },
  { $id: 'PayoutListResponse' },
);

export const TopupCreateRequest = Type.Object(
  { amount_cents: Type.Integer({ description: 'whole cents of CAD credit to buy' }) },
  { additionalProperties: false },
);
export const Topup = Type.Object(
  {
    topup_id: Type.String(),
    amount_cents: Type.Integer(),
    amount: Type.Number({ description: 'CAD' }),
    currency: Type.Literal('CAD'),
    status: StringEnum(['pending', 'paid', 'failed'] as const),
    checkout_url: Type.String({ description: "the provider's checkout page" }),
    provider: Type.String(),
    failure_reason: Nullable(Type.String()),
    created_at: DateTime,
    completed_at: Nullable(DateTime),
    confirmed_at: Nullable(
      Type.String({
        format: 'date-time',
        description:
          'when its credit became paid credit: at payment with Stripe; with the `local` provider when an administrator confirmed it (`svc topups confirm`). Null while the credit is promotional',
      }),
    ),
  },
  { $id: 'Topup' },
);
export const TopupListResponse = Type.Object(
  { topups: Type.Array(Type.Ref(Topup)), total: Type.Integer(), limit: Type.Integer(), offset: Type.Integer() },
  { $id: 'TopupListResponse' },
);
export const IdParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 100 }) });
export const ProviderParams = Type.Object({ provider: Type.String({ minLength: 1, maxLength: 40 }) });
export const WebhookResponse = Type.Object({
  received: Type.Boolean(),
  outcome: StringEnum(['applied', 'duplicate', 'ignored'] as const),
});

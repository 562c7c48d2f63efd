import { Type } from '@sinclair/typebox';
import { DateTime, Nullable, StringEnum } from './common.js';

/** The answer to `GET /api/v1/node/connect/status`. */
export const NodeConnectStatusResponseSchema = Type.Object(
  {
    account_id: Nullable(Type.String({ description: 'null until POST /api/v1/node/connect' })),
    onboarded: Type.Boolean(),
    provider: Type.String({ description: '`stripe`, or `local` (moves no real money)' }),
    moves_real_money: Type.Boolean(),
  },
  { $id: 'NodeConnectStatusResponse' },
);

export const PayoutSchema = Type.Object(
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

/** The answer to `GET /api/v1/payouts`. */
export const PayoutListResponseSchema = Type.Object(
  {
    payouts: Type.Array(Type.Ref(PayoutSchema), { description: 'newest first' }),
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

/** A top-up of credit (`POST /api/v1/billing/topups` and its reads). */
export const TopupSchema = Type.Object(
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

export const TopupListResponseSchema = Type.Object(
  { topups: Type.Array(Type.Ref(TopupSchema)), total: Type.Integer(), limit: Type.Integer(), offset: Type.Integer() },
  { $id: 'TopupListResponse' },
);

import { Type } from '@sinclair/typebox';
import { DateTime, Nullable } from './common.js';

/** One ledger row (`GET /api/v1/billing/transactions`, a job's audit). */
export const CreditTransactionSchema = Type.Object(
  {
    id: Type.String(),
    tx_type: Type.String({ description: '`charge`, `free_tier`, `topup`, `earning`, `refund`, ...' }),
    amount_cents: Type.Integer({
      description: 'whole cents this row moved after the sub-cent carry (negative for charges; may be 0)',
    }),
    amount_micro: Type.Optional(Type.Integer({ description: 'the exact amount in micro-CAD (negative for charges)' })),
    amount: Type.Optional(Type.Number({ description: 'the exact amount in CAD' })),
    free_micro: Type.Optional(
      Type.Integer({
        description: 'the part of amount_micro paid with, earned from or granted as promotional free-tier credit',
      }),
    ),
    hold_cents: Type.Optional(
      Type.Integer({ description: 'what the row changed the held amount by: + for a hold, - when it closes' }),
    ),
    debt_cents: Type.Optional(
      Type.Integer({
        description:
          'what the row changed the debt by: + for an earning_reversal the balance could not cover, - for a debt_repayment',
      }),
    ),
    balance_after: Type.Integer({ description: 'the balance in cents once this row was posted' }),
    description: Type.String(),
    ref: Nullable(Type.String(), { description: 'the job, request or hold it belongs to' }),
    created_at: DateTime,
  },
  { $id: 'CreditTransaction' },
);

export const CreditTransactionsResponseSchema = Type.Object(
  {
    transactions: Type.Array(Type.Ref(CreditTransactionSchema), { description: 'newest first' }),
    total: Type.Integer({ description: 'rows in the whole ledger' }),
    limit: Type.Integer(),
    offset: Type.Integer(),
  },
  { $id: 'CreditTransactionsResponse' },
);

export const BillingBalanceResponseSchema = Type.Object(
  {
    currency: Type.Literal('CAD'),
    balance_cents: Type.Integer({ description: 'the sum of the ledger rows' }),
    balance: Type.Number({ description: 'CAD' }),
    held_cents: Type.Integer({ description: 'reserved by running jobs' }),
    held: Type.Number({ description: 'CAD' }),
    available_cents: Type.Integer({ description: 'balance - held - debt; what a new job or request can use' }),
    available: Type.Number({ description: 'CAD' }),
    debt_cents: Type.Integer({
      description:
        'what the organization owes: a reversed earning its balance no longer held; not spendable, paid first from the next credits, never paid out',
    }),
    debt: Type.Number({ description: 'CAD' }),
    free_tier_granted_cents: Type.Integer({ description: 'the one-time free-tier grant on this ledger' }),
  },
  { $id: 'BillingBalanceResponse' },
);

export const SpendResponseSchema = Type.Object(
  {
    currency: Type.Literal('CAD'),
    days: Type.Integer(),
    since: Type.String({ format: 'date-time', description: 'the first UTC midnight of the window' }),
    series: Type.Array(
      Type.Object({
        date: Type.String({ description: 'UTC day, YYYY-MM-DD' }),
        spend_cents: Type.Integer({ description: 'charges posted that day, as a positive sum' }),
        credit_cents: Type.Integer({ description: 'grants, top-ups, refunds and earnings posted that day' }),
      }),
      { description: 'one entry per day, oldest first, zeros included' },
    ),
    total_spend_cents: Type.Integer(),
    total_credit_cents: Type.Integer(),
  },
  { $id: 'SpendResponse' },
);

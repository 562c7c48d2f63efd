import { Type } from '@sinclair/typebox';
import { StringEnum } from '../../platform/schemas.js';
import {
  CreditTransactionSchema,
  CreditTransactionsResponseSchema,
  BillingBalanceResponseSchema,
  SpendResponseSchema,
} from '@svc/protocol/rest';

/** Shapes the dashboard reads too: defined once in `@svc/protocol/rest`, named here as the routes use them. */
export const CreditTransaction = CreditTransactionSchema;
export const CreditTransactionsResponse = CreditTransactionsResponseSchema;
export const BillingBalanceResponse = BillingBalanceResponseSchema;
export const SpendResponse = SpendResponseSchema;

export const TransactionsQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
    offset: Type.Optional(Type.Integer({ minimum: 0, default: 0 })),
    format: Type.Optional(
      StringEnum(['json', 'csv'] as const, {
        default: 'json',
        description: '`csv`: the same page as RFC 4180 text/csv',
      }),
    ),
  },
  { additionalProperties: false },
);

export const SpendQuery = Type.Object(
  {
    days: Type.Optional(
      Type.Integer({ minimum: 1, maximum: 366, default: 30, description: 'UTC days, today included' }),
    ),
  },
  { additionalProperties: false },
);

import type { App } from '../../app.js';
import type { ServiceContext } from '../../service-context.js';
import { principalOf } from '../../platform/principal.js';
import { toCsv } from './csv.js';
import {
  BillingBalanceResponse,
  CreditTransaction,
  CreditTransactionsResponse,
  SpendQuery,
  SpendResponse,
  TransactionsQuery,
} from './schemas.js';
import { balanceReport, createLedger, spendSeries, transactionPage } from './service.js';

const tags = ['billing'];
const CSV_COLUMNS = ['id', 'created_at', 'tx_type', 'amount_cents', 'balance_after', 'description', 'ref'] as const;

export async function billingRoutes(app: App, ctx: ServiceContext): Promise<void> {
  const ledger = createLedger(ctx.db);
  app.addSchema(CreditTransaction);
  app.get(
    '/api/v1/billing/balance',
    {
      config: { auth: { permission: 'billing:read' } },
      schema: {
        summary: "The organization's credit balance, holds and free tier",
        tags,
        response: { 200: BillingBalanceResponse },
      },
    },
    async (request) => balanceReport(ledger, ctx.db, principalOf(request).orgId),
  );
  app.get(
    '/api/v1/billing/transactions',
    {
      config: { auth: { permission: 'billing:read' } },
      schema: {
        summary: "The organization's ledger, newest first (`format=csv` for a spreadsheet)",
        tags,
        querystring: TransactionsQuery,
        response: {
          200: {
            description: 'one page of the ledger',
            content: {
              'application/json': { schema: CreditTransactionsResponse },
              'text/csv': { schema: { type: 'string', description: `RFC 4180, header row: ${CSV_COLUMNS.join(',')}` } },
            },
          },
        },
      },
    },
    async (request, reply) => {
      const { limit = 50, offset = 0, format = 'json' } = request.query;
      const page = await transactionPage(ctx.db, principalOf(request).orgId, { limit, offset });
      if (format !== 'csv') return page;
      const csv = toCsv(
        CSV_COLUMNS,
        page.transactions.map((t) => CSV_COLUMNS.map((column) => t[column])),
      );
      return reply
        .type('text/csv; charset=utf-8; header=present')
        .header(
          'content-disposition',
          `attachment; filename="transactions-${offset}-${offset + page.transactions.length}.csv"`,
        )
        .send(csv);
    },
  );
  app.get(
    '/api/v1/billing/spend',
    {
      config: { auth: { permission: 'billing:read' } },
      schema: {
        summary: 'Spend and credits per UTC day over the last `days` days (for charts)',
        tags,
        querystring: SpendQuery,
        response: { 200: SpendResponse },
      },
    },
    async (request) => spendSeries(ctx.db, principalOf(request).orgId, request.query.days ?? 30),
  );
}

import { Type } from '@sinclair/typebox';
import type { App } from '../../app.js';
import type { PlatformServices } from '../../platform/services.js';
import { ApiError } from '../../platform/errors.js';
import { principalOf } from '../../platform/principal.js';
import { toCsv } from '../billing/csv.js';
import { Receipt, ReceiptList } from './schemas.js';
import { receiptsBetween, receiptsOfJob, receiptView } from './store.js';

const tags = ['receipts'];
const JobParam = Type.Object({ job: Type.String({ pattern: '^[A-Za-z0-9._:-]{1,256}$' }) });
const CSV_COLUMNS = [
  'id',
  'job_id',
  'node_id',
  'node_public_key',
  'result_hash',
  'metering_units',
  'signature',
  'signature_version',
  'created_at',
  'metadata',
] as const;

export async function receiptRoutes(app: App, ctx: PlatformServices): Promise<void> {
  app.addSchema(Receipt);
  const forJob = async (orgId: string, job: string) => {
    const rows = await receiptsOfJob(ctx.db, orgId, job);
    if (rows.length === 0) {
      const exists = await ctx.db.query(
        'SELECT 1 FROM jobs WHERE id = $1 AND org_id = $2 UNION ALL SELECT 1 FROM gateway_requests WHERE id = $1 AND org_id = $2',
        [job, orgId],
      );
      if (exists.rows.length === 0) throw new ApiError('not_found', `no job or request ${job}`);
    }
    return { receipts: rows.map(receiptView) };
  };
  app.get(
    '/api/v1/jobs/:job/receipts',
    {
      config: { auth: { permission: 'receipts:read' } },
      schema: { summary: 'Receipts of a job', tags, params: JobParam, response: { 200: ReceiptList } },
    },
    async (request) => forJob(principalOf(request).orgId, request.params.job),
  );
  app.get(
    '/api/v1/job/receipts/:job',
    {
      config: { auth: { permission: 'receipts:read' } },
      schema: {
        summary: 'Receipts of a job or gateway request (by its id)',
        tags,
        params: JobParam,
        response: { 200: ReceiptList },
      },
    },
    async (request) => forJob(principalOf(request).orgId, request.params.job),
  );
  app.get(
    '/api/v1/audit/receipts',
    {
      config: { auth: { permission: 'receipts:read' } },
      schema: {
        summary: 'Signed receipts for a period, as JSON or RFC 4180 CSV',
        tags,
        querystring: Type.Object({
          from: Type.Optional(Type.String({ format: 'date-time' })),
          to: Type.Optional(Type.String({ format: 'date-time' })),
          format: Type.Optional(Type.Union([Type.Literal('json'), Type.Literal('csv')])),
          limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 10_000, default: 1000 })),
        }),
        // JSON by default; with format=csv the body is text/csv and is sent as it is.
        response: { 200: ReceiptList },
      },
    },
    async (request, reply) => {
      const to = request.query.to ? new Date(request.query.to) : new Date();
      const from = request.query.from ? new Date(request.query.from) : new Date(to.getTime() - 30 * 86_400_000);
      if (from > to)
        throw new ApiError('invalid_request', 'from must not be after to', [{ path: '/from', message: 'is after to' }]);
      const receipts = (
        await receiptsBetween(ctx.db, principalOf(request).orgId, from, to, request.query.limit ?? 1000)
      ).map(receiptView);
      if (request.query.format !== 'csv') return { receipts };
      const rows = receipts.map((r) =>
        CSV_COLUMNS.map((c) => (c === 'metadata' ? JSON.stringify(r.metadata) : String(r[c]))),
      );
      return reply
        .type('text/csv; charset=utf-8')
        .header(
          'content-disposition',
          `attachment; filename="receipts-${from.toISOString().slice(0, 10)}-${to.toISOString().slice(0, 10)}.csv"`,
        )
        .send(toCsv(CSV_COLUMNS, rows) as unknown as { receipts: [] });
    },
  );
}

import { ReceiptUploadSchema, ResultUploadSchema } from '@svc/protocol';
import { Type } from '@sinclair/typebox';

export const Receipt = Type.Object(
  {
    id: Type.String(),
    job_id: Type.String(),
    node_id: Type.String(),
    node_public_key: Type.String(),
    result_hash: Type.String(),
    metering_units: Type.Integer(),
    signature: Type.String(),
    signature_version: Type.String(),
    metadata: Type.Object({}, { additionalProperties: true }),
    created_at: Type.String({ format: 'date-time' }),
  },
  { $id: 'Receipt' },
);

/** The body of `POST /api/v1/node/work/{work_id}/result`; a receipt may carry it inline as `result` (one shape, in packages/protocol). */
export const ResultRequest = Type.Object(ResultUploadSchema.properties, {
  $id: 'WorkResultRequest',
  additionalProperties: false,
});

export const NodeReceiptRequest = Type.Object(
  { ...ReceiptUploadSchema.properties, result: Type.Optional(ResultRequest) },
  { $id: 'NodeReceiptRequest', additionalProperties: false },
);

export const ReceiptList = Type.Object({ receipts: Type.Array(Type.Ref(Receipt)) }, { $id: 'ReceiptList' });

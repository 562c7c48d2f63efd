import { ReceiptUploadSchema, ResultUploadSchema, StoredReceiptSchema } from '@svc/protocol';
import { Type } from '@sinclair/typebox';

/** A stored receipt, as every receipts endpoint returns it (one shape, in packages/protocol). */
export const Receipt = Type.Object(StoredReceiptSchema.properties, { $id: 'Receipt' });

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

import { ReceiptUploadSchema, ResultUploadSchema, StoredReceiptSchema } from '@svc/protocol';
import { Type } from '@sinclair/typebox';

/** A stored receipt, as every receipts endpoint returns it (one shape, in packages/protocol). */
export const Receipt = Type.Object(StoredReceiptSchema.properties, { $id: 'Receipt' });

/** The body of `POST /api/v1/node/work/{work_id}/result`; a receipt may carry it inline as `result` (one shape, in packages/protocol). */
export const ResultRequest = Type.Object(ResultUploadSchema.properties, {
  $id: 'WorkResultRequest',
  additionalProperties: false,
});

/**
 * The body of `POST /api/v1/node/receipt`. The spec makes every field optional; the SVC1 signature
 * needs `job_id`, `pubkey`, `metering_units` and the result's hash, so those stay required, the hash
 * as `result_hash` or its alias `result_hash_hex` (`receiptWithResultHash` in work/intake.ts).
 */
export const NodeReceiptRequest = Type.Object(
  {
    ...ReceiptUploadSchema.properties,
    result_hash: Type.Optional(
      Type.String({
        pattern: '^[0-9a-f]{64}$',
        description: 'SHA-256 of the result (hex); required unless result_hash_hex carries it',
      }),
    ),
    result_hash_hex: Type.Optional(
      Type.String({ pattern: '^[0-9a-f]{64}$', description: 'the same hash under its other name' }),
    ),
    result: Type.Optional(ResultRequest),
  },
  { $id: 'NodeReceiptRequest', additionalProperties: false },
);

export const ReceiptList = Type.Object({ receipts: Type.Array(Type.Ref(Receipt)) }, { $id: 'ReceiptList' });

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

/** The body of `POST /api/v1/node/work/{work_id}/result`; a receipt may carry it inline as `result`. */
export const ResultRequest = Type.Object(
  {
    output: Type.String({ maxLength: 64 * 1024 * 1024 }),
    encoding: Type.Union([Type.Literal('utf8'), Type.Literal('base64')]),
    content_type: Type.Optional(Type.String({ maxLength: 128 })),
    result_hash: Type.String({ pattern: '^[0-9a-f]{64}$' }),
    metering_units: Type.Integer({ minimum: 0, maximum: 2 ** 53 - 1 }),
    usage: Type.Optional(Type.Object({}, { additionalProperties: true })),
    exit_code: Type.Optional(Type.Integer()),
  },
  { $id: 'WorkResultRequest', additionalProperties: false },
);

export const NodeReceiptRequest = Type.Object(
  {
    job_id: Type.String({ pattern: '^[A-Za-z0-9._:-]{1,256}$' }),
    pubkey: Type.String({ pattern: '^[0-9a-f]{64}$' }),
    result_hash: Type.String({ pattern: '^[0-9a-f]{64}$' }),
    result_hash_hex: Type.Optional(Type.String({ pattern: '^[0-9a-f]{64}$' })),
    signature: Type.String({ pattern: '^[0-9a-f]{128}$' }),
    metering_units: Type.Integer({ minimum: 0, maximum: 2 ** 53 - 1 }),
    green_multiplier_bps: Type.Optional(Type.Integer({ minimum: 0, maximum: 100_000 })),
    metadata: Type.Optional(Type.Object({}, { additionalProperties: true })),
    result: Type.Optional(ResultRequest),
  },
  { $id: 'NodeReceiptRequest', additionalProperties: false },
);

export const ReceiptList = Type.Object({ receipts: Type.Array(Type.Ref(Receipt)) }, { $id: 'ReceiptList' });

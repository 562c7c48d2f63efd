import { Type } from '@sinclair/typebox';
import { DateTime, Nullable } from './common.js';

/** An API key as listed: never the secret, which only its creation answer carries. */
export const APIKeyRecordSchema = Type.Object(
  {
    key_id: Type.String(),
    prefix: Type.String({ description: '`svc_live_<key_id>`, stored in clear' }),
    hash_alg: Type.String({ description: '`hmac-sha256-v1`' }),
    label: Type.String(),
    buyer_id: Type.String({ description: 'who created it' }),
    scopes: Type.Array(Type.String()),
    created_at: DateTime,
    last_used_at: Nullable(DateTime),
    revoked_at: Nullable(DateTime),
    revoked_reason: Nullable(Type.String()),
  },
  { $id: 'APIKeyRecord' },
);

/** The answer to `POST /api/v1/auth/api-keys`. */
export const APIKeyCreateResponseSchema = Type.Object(
  { api_key: Type.String({ description: 'the full key; shown this once only' }), key: Type.Ref(APIKeyRecordSchema) },
  { $id: 'APIKeyCreateResponse' },
);

/** The answer to `GET /api/v1/auth/api-keys`. */
export const APIKeyListResponseSchema = Type.Object(
  { keys: Type.Array(Type.Ref(APIKeyRecordSchema)) },
  { $id: 'APIKeyListResponse' },
);

import { Type } from '@sinclair/typebox';

export const APIKeyRecord = Type.Object(
  {
    key_id: Type.String(),
    prefix: Type.String({ description: '`svc_live_<key_id>`, stored in clear' }),
    hash_alg: Type.String({ description: '`hmac-sha256-v1`' }),
    label: Type.String(),
    buyer_id: Type.String({ description: 'who created it' }),
    scopes: Type.Array(Type.String()),
    created_at: Type.String({ format: 'date-time' }),
    last_used_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
    revoked_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
    revoked_reason: Type.Union([Type.String(), Type.Null()]),
  },
  { $id: 'APIKeyRecord' },
);

export const APIKeyCreateRequest = Type.Object(
  {
    label: Type.Optional(Type.String({ maxLength: 100 })),
    name: Type.Optional(Type.String({ maxLength: 100, description: 'alias of `label`' })),
    scopes: Type.Optional(
      Type.Array(Type.String({ minLength: 1, maxLength: 64 }), {
        minItems: 1,
        maxItems: 20,
        description:
          'default `["buyer"]`; `buyer`, `read-only`, `write-only`, `buyer:read`, `operator`, or `resource[:read|write]`',
      }),
    ),
  },
  { $id: 'APIKeyCreateRequest', additionalProperties: false },
);

export const APIKeyCreateResponse = Type.Object(
  { api_key: Type.String({ description: 'the full key; shown this once only' }), key: Type.Ref(APIKeyRecord) },
  { $id: 'APIKeyCreateResponse' },
);

export const APIKeyListResponse = Type.Object(
  { keys: Type.Array(Type.Ref(APIKeyRecord)) },
  { $id: 'APIKeyListResponse' },
);

export const APIKeyRevokeRequest = Type.Object(
  { reason: Type.String({ minLength: 1, maxLength: 500 }) },
  { $id: 'APIKeyRevokeRequest', additionalProperties: false },
);

export const KeyIdParams = Type.Object({ key_id: Type.String({ pattern: '^[a-z0-9]{1,64}$' }) });

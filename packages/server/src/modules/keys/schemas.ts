import { Type } from '@sinclair/typebox';
import { APIKeyRecordSchema, APIKeyCreateResponseSchema, APIKeyListResponseSchema } from '@svc/protocol/rest';

/** Shapes the dashboard reads too: defined once in `@svc/protocol/rest`, named here as the routes use them. */
export const APIKeyRecord = APIKeyRecordSchema;
export const APIKeyCreateResponse = APIKeyCreateResponseSchema;
export const APIKeyListResponse = APIKeyListResponseSchema;

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

export const APIKeyRevokeRequest = Type.Object(
  { reason: Type.String({ minLength: 1, maxLength: 500 }) },
  { $id: 'APIKeyRevokeRequest', additionalProperties: false },
);

export const KeyIdParams = Type.Object({ key_id: Type.String({ pattern: '^[a-z0-9]{1,64}$' }) });

import { Type } from '@sinclair/typebox';
import { ConfigResponseSchema, InferenceHealthResponseSchema, PlatformKeysResponseSchema } from '@svc/protocol/rest';

/** Shapes the dashboard reads too: defined once in `@svc/protocol/rest`, named here as the routes use them. */
export const ConfigResponse = ConfigResponseSchema;
export const InferenceHealthResponse = InferenceHealthResponseSchema;
export const PlatformKeysResponse = PlatformKeysResponseSchema;

export const HealthResponse = Type.Object(
  {
    ok: Type.Boolean({ description: 'true when the store answers' }),
    uptime: Type.String({ description: 'time since start, e.g. `3h07m12s`' }),
    uptime_seconds: Type.Integer(),
    version: Type.String({ description: 'service version' }),
    store: Type.Union([Type.Literal('pglite'), Type.Literal('postgres')]),
  },
  { $id: 'HealthResponse' },
);

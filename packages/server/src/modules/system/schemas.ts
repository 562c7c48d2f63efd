import { LogKeys } from '../log/schemas.js';
import { Type } from '@sinclair/typebox';

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

export const ConfigResponse = Type.Object(
  {
    default_runner_image: Type.String({ description: 'runner used for cpu/gpu compute jobs when none is named' }),
    dev_mode: Type.Boolean(),
    job_spec_version: Type.String(),
    currency: Type.Literal('CAD'),
    execution_pools: Type.Array(Type.String()),
    max_request_body_bytes: Type.Integer(),
    public_url: Type.String(),
  },
  { $id: 'ConfigResponse', additionalProperties: true },
);

export const InferenceHealthResponse = Type.Object(
  {
    chat_models_in_catalog: Type.Integer(),
    chat_models_with_capacity: Type.Integer({
      description: 'chat models served by at least one node seen in the last 30 s',
    }),
    online_nodes_heartbeat_5m: Type.Integer({ description: 'nodes that made a signed call in the last 5 minutes' }),
    registered_nodes: Type.Integer(),
  },
  { $id: 'InferenceHealthResponse' },
);

export const PlatformKeysResponse = Type.Object(
  {
    keys: Type.Array(
      Type.Object({
        key_id: Type.String(),
        algorithm: Type.Literal('ed25519'),
        public_key_hex: Type.String({ pattern: '^[0-9a-f]{64}$' }),
        valid_from: Type.String({ format: 'date-time' }),
        valid_until: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
        active: Type.Boolean(),
      }),
    ),
    log: LogKeys,
  },
  { $id: 'PlatformKeysResponse' },
);

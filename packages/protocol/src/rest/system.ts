import { Type } from '@sinclair/typebox';
import { DateTime, Nullable } from './common.js';

/** The answer to `GET /api/v1/config`. */
export const ConfigResponseSchema = Type.Object(
  {
    default_runner_image: Type.String({
      description:
        "the oci runner's image for buyer code naming none, on a node that loaded no image of its own but holds this one (SVC_DEFAULT_RUNNER_IMAGE); 'process' when the platform names none",
    }),
    dev_mode: Type.Boolean(),
    job_spec_version: Type.String(),
    currency: Type.Literal('CAD'),
    execution_pools: Type.Array(Type.String()),
    max_request_body_bytes: Type.Integer(),
    public_url: Type.String(),
  },
  { $id: 'ConfigResponse', additionalProperties: true },
);

/** The answer to `GET /api/v1/inference/health`. */
export const InferenceHealthResponseSchema = Type.Object(
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

/** The log's names and note verifier keys, as `GET /api/v1/keys/platform` lists them under `log`. */
export const LogKeysSchema = Type.Object({
  origin: Type.String({ description: 'the name checkpoints are signed under now (SVC_LOG_ORIGIN)' }),
  verifier_keys: Type.Array(Type.String(), {
    description:
      'note verifier keys (<name>+<8 hex>+<base64>): every name the log signed under with every platform key that ever signed',
  }),
});

/** The answer to `GET /api/v1/keys/platform`. */
export const PlatformKeysResponseSchema = Type.Object(
  {
    keys: Type.Array(
      Type.Object({
        key_id: Type.String(),
        algorithm: Type.Literal('ed25519'),
        public_key_hex: Type.String({ pattern: '^[0-9a-f]{64}$' }),
        valid_from: DateTime,
        valid_until: Nullable(DateTime),
        active: Type.Boolean(),
      }),
    ),
    log: LogKeysSchema,
  },
  { $id: 'PlatformKeysResponse' },
);

const Hex = (bytes: number) => Type.String({ pattern: `^[0-9a-f]{${bytes * 2}}$` });

/** The node agent tarball this server serves (`GET /api/v1/downloads`, `agent`). */
export const AgentDownloadSchema = Type.Object(
  {
    status: Type.Union([Type.Literal('ready'), Type.Literal('building'), Type.Literal('unavailable')]),
    file: Type.String({ description: '`svc-<version>.tgz`' }),
    url: Type.String({ description: 'where the tarball is served: `npm install -g <url>` installs `svc`' }),
    size_bytes: Type.Optional(Type.Integer()),
    sha256: Type.Optional(Hex(32)),
    signature: Type.Optional(
      Type.Object({
        algorithm: Type.Literal('ed25519'),
        key_id: Type.String({ description: 'the platform key (GET /api/v1/keys/platform) that signed' }),
        public_key_hex: Hex(32),
        signature_hex: Hex(64),
        signed_bytes: Type.String({ description: 'which bytes are signed, and how' }),
      }),
    ),
    verify: Type.Optional(Type.String({ description: 'a command that checks a downloaded file' })),
    reason: Type.Optional(Type.String({ description: 'why there is no tarball yet (status building or unavailable)' })),
  },
  { $id: 'AgentDownload' },
);

/** The answer to `GET /api/v1/downloads`. */
export const DownloadsInfoResponseSchema = Type.Object(
  {
    version: Type.String({ description: 'node agent (svc CLI) version' }),
    platforms: Type.Record(Type.String(), Type.Object({ runtime: Type.String(), engines: Type.Array(Type.String()) })),
    install_commands: Type.Record(
      Type.String(),
      Type.String({ description: 'shell lines: npm install -g, then svc node' }),
    ),
    agent: AgentDownloadSchema,
  },
  { $id: 'DownloadsInfoResponse' },
);

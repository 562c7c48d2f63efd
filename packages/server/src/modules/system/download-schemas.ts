import { Type } from '@sinclair/typebox';

const Hex = (bytes: number) => Type.String({ pattern: `^[0-9a-f]{${bytes * 2}}$` });

export const AgentDownload = Type.Object(
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

export const DownloadsInfoResponse = Type.Object(
  {
    version: Type.String({ description: 'node agent (svc CLI) version' }),
    platforms: Type.Record(Type.String(), Type.Object({ runtime: Type.String(), engines: Type.Array(Type.String()) })),
    install_commands: Type.Record(
      Type.String(),
      Type.String({ description: 'shell lines: npm install -g, then svc node' }),
    ),
    agent: AgentDownload,
  },
  { $id: 'DownloadsInfoResponse' },
);

export const DownloadParams = Type.Object({ file: Type.String({ maxLength: 200 }) });

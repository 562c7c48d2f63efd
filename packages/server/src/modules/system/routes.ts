import type { App } from '../../app.js';
import type { ServiceContext } from '../../service-context.js';
import { ApiError } from '../../platform/errors.js';
import { agentTarball, agentUnavailableReason, AGENT_FILE, downloadsInfo } from './agent-download.js';
import { DownloadParams, DownloadsInfoResponse } from './download-schemas.js';
import { ConfigResponse, HealthResponse, InferenceHealthResponse, PlatformKeysResponse } from './schemas.js';
import { health, inferenceHealth, platformKeys, publicConfig } from './service.js';

const tags = ['service'];

export async function systemRoutes(app: App, ctx: ServiceContext): Promise<void> {
  app.get(
    '/api/v1/health',
    {
      config: { auth: { public: true }, rateLimit: false },
      schema: { summary: 'Liveness and store health', tags, response: { 200: HealthResponse, 503: HealthResponse } },
    },
    async (_request, reply) => {
      const body = await health(ctx);
      return reply.code(body.ok ? 200 : 503).send(body);
    },
  );
  app.get(
    '/api/v1/config',
    {
      config: { auth: { permission: 'config:read' } },
      schema: { summary: 'Service configuration', tags, response: { 200: ConfigResponse } },
    },
    async () => publicConfig(ctx),
  );
  app.get(
    '/api/v1/inference/health',
    {
      config: { auth: { permission: 'models:read' } },
      schema: { summary: 'Inference capacity', tags, response: { 200: InferenceHealthResponse } },
    },
    async () => inferenceHealth(ctx),
  );
  app.get(
    '/api/v1/downloads',
    {
      config: { auth: { public: true } },
      schema: {
        summary: 'Node agent version, install commands, and its signed tarball',
        tags,
        response: { 200: DownloadsInfoResponse },
      },
    },
    async () => downloadsInfo(ctx),
  );
  app.get(
    '/api/v1/downloads/:file',
    {
      config: { auth: { public: true } },
      schema: { summary: 'The node agent tarball (npm install -g <url>)', tags, params: DownloadParams },
    },
    async (request, reply) => {
      const bytes = await agentTarball(ctx, request.params.file);
      if (!bytes)
        throw new ApiError(
          'not_found',
          request.params.file === AGENT_FILE ? agentUnavailableReason(ctx) : `no download named ${request.params.file}`,
        );
      // A rebuild of the same version replaces the bytes: caches ask again.
      return reply.type('application/gzip').header('cache-control', 'no-cache').send(bytes);
    },
  );
  app.get(
    '/api/v1/keys/platform',
    {
      config: { auth: { public: true } },
      schema: { summary: 'Platform signing keys with validity windows', tags, response: { 200: PlatformKeysResponse } },
    },
    async () => platformKeys(ctx),
  );
}

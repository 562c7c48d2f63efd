import type { App } from '../../app.js';
import type { ServiceContext } from '../../context.js';
import {
  ConfigResponse,
  DownloadsInfoResponse,
  HealthResponse,
  InferenceHealthResponse,
  PlatformKeysResponse,
} from './schemas.js';
import { downloads, health, inferenceHealth, platformKeys, publicConfig } from './service.js';

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
      schema: { summary: 'Node agent version and install commands', tags, response: { 200: DownloadsInfoResponse } },
    },
    async () => downloads(ctx),
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

import type { App } from '../../app.js';
import type { ServiceContext } from '../../service-context.js';
import { principalOf } from '../../platform/principal.js';
import { MessageResponse } from '../../platform/schemas.js';
import {
  APIKeyCreateRequest,
  APIKeyCreateResponse,
  APIKeyListResponse,
  APIKeyRecord,
  APIKeyRevokeRequest,
  KeyIdParams,
} from './schemas.js';
import { listVisibleKeys, mintKey, revokeVisibleKey } from './service.js';

const tags = ['keys'];

export async function keyRoutes(app: App, ctx: ServiceContext): Promise<void> {
  app.addSchema(APIKeyRecord);
  app.post(
    '/api/v1/auth/api-keys',
    {
      config: { auth: { permission: 'keys:write' }, noStore: true },
      schema: {
        summary: 'Create an API key (the full key is returned once)',
        tags,
        body: APIKeyCreateRequest,
        response: { 201: APIKeyCreateResponse },
      },
    },
    async (request, reply) => {
      const created = await mintKey(ctx, principalOf(request), {
        label: (request.body.label ?? request.body.name ?? '').trim(),
        scopes: request.body.scopes ?? ['buyer'],
      });
      return reply.code(201).send(created);
    },
  );
  app.get(
    '/api/v1/auth/api-keys',
    {
      config: { auth: { permission: 'keys:read' } },
      schema: { summary: 'List API keys (records only, never secrets)', tags, response: { 200: APIKeyListResponse } },
    },
    async (request) => listVisibleKeys(ctx, principalOf(request)),
  );
  app.post(
    '/api/v1/auth/api-keys/:key_id/revoke',
    {
      config: { auth: { permission: 'keys:write' } },
      schema: {
        summary: 'Revoke a key; it fails with 401 from the next request on',
        tags,
        params: KeyIdParams,
        body: APIKeyRevokeRequest,
        response: { 200: MessageResponse },
      },
    },
    async (request) => revokeVisibleKey(ctx, principalOf(request), request.params.key_id, request.body.reason),
  );
}

import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { FastifyRequest } from 'fastify';
import type { App } from '../../app.js';
import type { PlatformServices } from '../../platform/services.js';
import { ApiError } from '../../platform/errors.js';
import { SERVICE_VERSION } from '../../platform/version.js';
import { createMcpServer, type Credential } from './tools.js';

const tags = ['mcp'];
const auth = { auth: { authenticated: true as const } };

/**
 * Browsers send `Origin`; MCP's transport rules require refusing origins we do not serve (DNS
 * rebinding). Allowed: this server's public URL, the origin the request itself was addressed to,
 * and SVC_MCP_ALLOWED_ORIGINS. Clients that are not browsers send no Origin and are not affected.
 */
function checkOrigin(ctx: PlatformServices, request: FastifyRequest): void {
  const origin = request.headers.origin;
  if (origin === undefined) return;
  const self = `${request.protocol}://${request.headers.host ?? ''}`;
  const allowed = new Set([new URL(ctx.config.publicUrl).origin, self, ...ctx.config.mcpAllowedOrigins]);
  if (!allowed.has(origin))
    throw new ApiError(
      'forbidden',
      `origin ${origin} may not use /mcp (allowed: this server's own origin and SVC_MCP_ALLOWED_ORIGINS)`,
    );
}

function credentialHeaders(request: FastifyRequest): Credential {
  const headers: Credential = {};
  if (typeof request.headers.authorization === 'string') headers.authorization = request.headers.authorization;
  if (typeof request.headers['x-api-key'] === 'string') headers['x-api-key'] = request.headers['x-api-key'];
  return headers;
}

/** `/mcp`: MCP's Streamable HTTP transport, stateless (no session), JSON responses. docs/mcp.md */
export async function mcpRoutes(app: App, ctx: PlatformServices): Promise<void> {
  app.post(
    '/mcp',
    {
      config: auth,
      schema: {
        summary: 'MCP endpoint (Streamable HTTP, stateless): tools over the same API key and scopes; see docs/mcp.md',
        tags,
        // A JSON-RPC 2.0 message (or, in the 2025-03-26 revision, a batch): validated by the SDK.
      },
    },
    async (request, reply) => {
      checkOrigin(ctx, request);
      const server = createMcpServer(app, credentialHeaders(request), SERVICE_VERSION);
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      // The transport writes the response itself: keep the headers set so far (request id, rate limits).
      for (const [name, value] of Object.entries(reply.getHeaders()))
        if (value !== undefined) reply.raw.setHeader(name, value);
      reply.hijack();
      reply.raw.on('close', () => {
        void transport.close();
        void server.close();
      });
      try {
        await server.connect(transport);
        await transport.handleRequest(request.raw, reply.raw, request.body);
      } catch (err) {
        ctx.log.error({ err }, 'mcp request failed');
        if (!reply.raw.headersSent) {
          reply.raw
            .writeHead(500, { 'content-type': 'application/json' })
            .end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32603, message: 'internal error' }, id: null }));
        }
      }
    },
  );
  // Stateless: no server-initiated stream to GET and no session to DELETE.
  for (const method of ['GET', 'DELETE'] as const) {
    app.route({
      method,
      url: '/mcp',
      config: auth,
      schema: { summary: `${method} /mcp: 405, this endpoint is stateless (POST only)`, tags },
      handler: async (request) => {
        checkOrigin(ctx, request);
        throw new ApiError(
          'method_not_allowed',
          `${method} /mcp is not supported: the MCP endpoint is stateless; POST JSON-RPC messages`,
          undefined,
          { allow: 'POST' },
        );
      },
    });
  }
}

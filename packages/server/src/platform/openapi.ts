import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import type { ServiceContext } from '../context.js';
import { ERROR_CODES } from './errors.js';
import { isOpenAiRoute } from './http-errors.js';
import { assertRouteDeclaresAuth, isPublicRoute } from './route-auth.js';
import { SERVICE_VERSION } from './version.js';

export const ErrorResponse = Type.Object(
  {
    code: Type.Integer({ description: 'HTTP status code' }),
    error: Type.Union(
      Object.keys(ERROR_CODES).map((code) => Type.Literal(code)),
      { description: 'stable error string' },
    ),
    message: Type.String({ description: 'human-readable explanation' }),
    details: Type.Optional(Type.Array(Type.Object({ path: Type.String(), message: Type.String() }))),
  },
  {
    $id: 'ErrorResponse',
    description: 'Every 4xx/5xx response under /api/v1/, /mcp and the rest has this shape (DESIGN.md section 5).',
  },
);

/** OpenAI's error envelope: every 4xx/5xx response under `/v1/` (DESIGN.md section 5, docs/errors.md). */
export const OpenAIErrorResponse = Type.Object(
  {
    error: Type.Object({
      message: Type.String({ description: 'human-readable explanation' }),
      type: Type.String({
        description:
          "OpenAI's type for the status: invalid_request_error, authentication_error, permission_error, insufficient_quota, rate_limit_error, api_error",
      }),
      param: Type.Union([Type.String(), Type.Null()], {
        description: 'the offending field (`messages[0].content`), or null',
      }),
      code: Type.Union(
        Object.keys(ERROR_CODES).map((code) => Type.Literal(code)),
        { description: 'stable error string' },
      ),
    }),
  },
  { $id: 'OpenAIErrorResponse', description: "Every 4xx/5xx response under /v1/ has this shape (OpenAI's envelope)." },
);

/**
 * Generates the OpenAPI 3.0.3 document from the route schemas that validate requests, serves it
 * at `GET /openapi.json` and renders it at `/docs`. Must be installed before any route.
 */
export async function installOpenApi(app: FastifyInstance, ctx: ServiceContext): Promise<void> {
  app.addSchema(ErrorResponse);
  app.addSchema(OpenAIErrorResponse);
  app.addHook('onRoute', (route) => {
    assertRouteDeclaresAuth(route);
    const schema = (route.schema ??= {}) as {
      response?: Record<string, unknown>;
      security?: unknown[];
      hide?: boolean;
    };
    if (schema.hide) return;
    const error = isOpenAiRoute(route.url) ? 'OpenAIErrorResponse#' : 'ErrorResponse#';
    schema.response = { '4xx': { $ref: error }, '5xx': { $ref: error }, ...schema.response };
    if (isPublicRoute(route.config)) schema.security = [];
  });
  await app.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'SVC API',
        version: SERVICE_VERSION,
        description:
          'Distributed compute marketplace and inference gateway. Every result carries an Ed25519-signed receipt.',
      },
      servers: [{ url: ctx.config.publicUrl }],
      components: {
        securitySchemes: {
          bearer: { type: 'http', scheme: 'bearer', description: 'API key (svc_live_...) or session token' },
          apiKey: { type: 'apiKey', in: 'header', name: 'X-API-Key' },
        },
      },
      security: [{ bearer: [] }, { apiKey: [] }],
    },
    refResolver: {
      buildLocalReference: (json, _base, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`),
    },
  });
  app.get(
    '/openapi.json',
    {
      config: { auth: { public: true } },
      schema: {
        summary: 'This OpenAPI 3.0.3 document',
        tags: ['service'],
        response: { 200: Type.Object({}, { additionalProperties: true }) },
      },
    },
    async () => app.swagger(),
  );
  await app.register(swaggerUi, { routePrefix: '/docs', uiConfig: { docExpansion: 'list', deepLinking: true } });
}

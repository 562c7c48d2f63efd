import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifySchema } from 'fastify';
import type { PlatformServices } from './services.js';
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

type Named = Record<string, unknown> & { $id: string };

function isNamed(schema: unknown): schema is Named {
  return typeof schema === 'object' && schema !== null && typeof (schema as { $id?: unknown }).$id === 'string';
}

/** A route's body and response schemas that carry an `$id` (the name a generated client gives the type). */
function namedSchemas(schema: FastifySchema | undefined): Named[] {
  const parts = [schema?.body, ...Object.values((schema?.response ?? {}) as Record<string, unknown>)];
  return parts.filter(isNamed);
}

/**
 * The route schema as the document shows it: a body or response that is a registered shared
 * schema becomes a `$ref` to its component, so that a client generator names the type after the
 * `$id` (AuthRequest, EstimateResponse) instead of inlining an anonymous object per operation.
 * Only the document changes: the route keeps its own schema for validation and serialization,
 * so a `$ref` is never handed to the validator compiler (which sees no shared schemas).
 */
function referenceNamedSchemas(app: FastifyInstance, schema: FastifySchema): FastifySchema {
  const asRef = (part: unknown): unknown =>
    isNamed(part) && JSON.stringify(app.getSchema(part.$id)) === JSON.stringify(part) ? { $ref: `${part.$id}#` } : part;
  const response = schema.response as Record<string, unknown> | undefined;
  return {
    ...schema,
    ...(schema.body === undefined ? {} : { body: asRef(schema.body) }),
    ...(response === undefined
      ? {}
      : { response: Object.fromEntries(Object.entries(response).map(([status, part]) => [status, asRef(part)])) }),
  };
}

/** The named body and response schemas of the routes registered so far, per app (a deliberate cache). */
const namedRouteSchemas = new WeakMap<FastifyInstance, Named[]>();

/**
 * Registers each named body and response schema of the routes as a shared schema (once per
 * `$id`), so that the document lists it as a component and its operations refer to it. Called
 * once every route is registered: a module registers its own shared schemas (`app.addSchema`)
 * after routes of other modules may already use them, and a second `addSchema` of an `$id` throws.
 *
 * @example
 * await registerRoutes(app, ctx);
 * registerNamedRouteSchemas(app);
 * await app.ready();
 */
export function registerNamedRouteSchemas(app: FastifyInstance): void {
  for (const schema of namedRouteSchemas.get(app) ?? []) if (!app.getSchema(schema.$id)) app.addSchema(schema);
}

/**
 * Generates the OpenAPI 3.0.3 document from the route schemas that validate requests, serves it
 * at `GET /openapi.json` and renders it at `/docs`. Must be installed before any route.
 */
export async function installOpenApi(app: FastifyInstance, ctx: PlatformServices): Promise<void> {
  const named = namedRouteSchemas.get(app) ?? [];
  namedRouteSchemas.set(app, named);
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
    named.push(...namedSchemas(route.schema));
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
    transform: ({ schema, url }) => ({ schema: referenceNamedSchemas(app, schema), url }),
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

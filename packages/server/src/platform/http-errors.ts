import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError, codeForStatus, toOpenAiBody } from './errors.js';
import { validationDetails } from './validation.js';

const HTTP_PART_NAMES: Record<string, string> = {
  body: 'body',
  querystring: 'query',
  params: 'path',
  headers: 'header',
};

/** Turns whatever was thrown into the one error shape; unknown errors become `internal`. */
export function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  const e = err as Partial<FastifyError> & { validationContext?: string };
  if (Array.isArray(e.validation)) {
    const part = HTTP_PART_NAMES[e.validationContext ?? 'body'] ?? 'request';
    const details = validationDetails(e.validation);
    const first = details[0];
    const message = first ? `invalid ${part}: ${first.path} ${first.message}` : `invalid ${part}`;
    return new ApiError('invalid_request', message, details);
  }
  const status = typeof e.statusCode === 'number' ? e.statusCode : 500;
  // Fastify's own 4xx errors (bad JSON, body too large, media type) carry safe messages.
  if (status >= 400 && status < 500) {
    if (e.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
      return new ApiError('unsupported_media_type', `unsupported content type; send application/json`);
    }
    if (e.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return new ApiError('payload_too_large', 'request body is too large');
    const message =
      e instanceof SyntaxError || e.code === 'FST_ERR_CTP_INVALID_JSON_BODY'
        ? `malformed JSON body: ${e.message ?? ''}`
        : (e.message ?? 'bad request');
    return new ApiError(codeForStatus(status), message);
  }
  return new ApiError('internal', 'internal server error');
}

/** True for the OpenAI-compatible surface (`/v1/...`), whose errors use OpenAI's envelope. */
export function isOpenAiRoute(url: string): boolean {
  return url === '/v1' || url.startsWith('/v1/') || url.startsWith('/v1?');
}

/** The error body for a request: OpenAI's envelope under `/v1/`, ErrorResponse everywhere else. */
export function errorBodyFor(url: string, api: ApiError): object {
  return isOpenAiRoute(url) ? toOpenAiBody(api) : api.toBody();
}

/**
 * Installs the error handler and the 404 handler: every failure leaves as `{code, error, message}`,
 * or in OpenAI's envelope `{error: {message, type, param, code}}` under `/v1/` (DESIGN.md section 5).
 * `pageFallback` may answer an unmatched request first (the dashboard's client-side pages); it
 * returns undefined to leave it to the JSON 404.
 */
export function installErrorHandling(
  app: FastifyInstance,
  options: { pageFallback?: (request: FastifyRequest, reply: FastifyReply) => FastifyReply | undefined } = {},
): void {
  app.setErrorHandler((err, request, reply) => {
    const api = toApiError(err);
    if (api.status >= 500) request.log.error({ err }, 'request failed');
    else request.log.info({ error: api.code, status: api.status }, api.message);
    if (api.headers) void reply.headers(api.headers);
    return reply.code(api.status).type('application/json; charset=utf-8').send(errorBodyFor(request.url, api));
  });
  app.setNotFoundHandler((request, reply) => {
    const page = options.pageFallback?.(request, reply);
    if (page) return page;
    const api = new ApiError('not_found', `no route ${request.method} ${request.url.split('?')[0] ?? ''}`);
    return reply.code(404).send(errorBodyFor(request.url, api));
  });
}

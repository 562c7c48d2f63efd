/**
 * The stable error strings of the API (DESIGN.md section 5). Clients, the CLI, the dashboard and
 * the docs rely on these exact strings; add new ones, never rename.
 */
export const ERROR_CODES = {
  invalid_request: 400,
  unauthorized: 401,
  insufficient_credits: 402,
  insufficient_scope: 403,
  forbidden: 403,
  not_found: 404,
  model_not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  rate_limited: 429,
  internal: 500,
  upstream_error: 502,
  no_capacity: 503,
  timeout: 504,
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

export interface ErrorDetail {
  path: string;
  message: string;
}

/** The body of every 4xx/5xx response. */
export interface ErrorBody {
  code: number;
  error: ErrorCode;
  message: string;
  details?: ErrorDetail[];
}

/**
 * A failure we mean to show the client. Anything else thrown is rendered as `internal`.
 *
 * @example
 * throw new ApiError('not_found', 'job job_123 not found');
 */
export class ApiError extends Error {
  override name = 'ApiError';
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: ErrorDetail[],
    readonly headers?: Record<string, string>,
  ) {
    super(message);
    this.status = ERROR_CODES[code];
  }

  toBody(): ErrorBody {
    const body: ErrorBody = { code: this.status, error: this.code, message: this.message };
    if (this.details) body.details = this.details;
    return body;
  }
}

/** OpenAI's error `type` for a status (DESIGN.md section 5, the `/v1/` surface). */
export type OpenAiErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'permission_error'
  | 'insufficient_quota'
  | 'rate_limit_error'
  | 'api_error';

/** The body of every 4xx/5xx response under `/v1/`: OpenAI's envelope, read by every OpenAI client. */
export interface OpenAiErrorBody {
  error: { message: string; type: OpenAiErrorType; param: string | null; code: ErrorCode };
}

/** OpenAI's `type` for an HTTP status. */
export function openAiErrorType(status: number): OpenAiErrorType {
  if (status === 401) return 'authentication_error';
  if (status === 402) return 'insufficient_quota';
  if (status === 403) return 'permission_error';
  if (status === 429) return 'rate_limit_error';
  return status >= 500 ? 'api_error' : 'invalid_request_error';
}

/**
 * A JSON pointer of a validation detail as OpenAI names a parameter: `/messages/0/content` ->
 * `messages[0].content`; the root (`/` or empty) names no field.
 */
export function paramOfPath(path: string): string | null {
  const parts = path
    .split('/')
    .slice(1)
    .filter((p) => p !== '');
  if (!parts.length) return null;
  return parts.map((p, i) => (/^\d+$/.test(p) ? `[${p}]` : i === 0 ? p : `.${p}`)).join('');
}

/**
 * The error in OpenAI's envelope: `message` ours, `type` OpenAI's for the status, `code` our
 * stable string, `param` the first offending field of the validation details (else null).
 *
 * @example
 * toOpenAiBody(new ApiError('insufficient_credits', 'insufficient credits: 0 cents available'));
 * // { error: { message: 'insufficient credits: 0 cents available', type: 'insufficient_quota', param: null, code: 'insufficient_credits' } }
 */
export function toOpenAiBody(err: ApiError): OpenAiErrorBody {
  const first = err.details?.[0];
  return {
    error: {
      message: err.message,
      type: openAiErrorType(err.status),
      param: first ? paramOfPath(first.path) : null,
      code: err.code,
    },
  };
}

/** Maps an HTTP status we did not raise ourselves (Fastify, a plugin) to its stable string. */
export function codeForStatus(status: number): ErrorCode {
  switch (status) {
    case 400:
      return 'invalid_request';
    case 401:
      return 'unauthorized';
    case 402:
      return 'insufficient_credits';
    case 403:
      return 'forbidden';
    case 404:
      return 'not_found';
    case 405:
      return 'not_found';
    case 409:
      return 'conflict';
    case 413:
      return 'payload_too_large';
    case 415:
      return 'unsupported_media_type';
    case 429:
      return 'rate_limited';
    case 502:
      return 'upstream_error';
    case 503:
      return 'no_capacity';
    case 504:
      return 'timeout';
    default:
      return status >= 400 && status < 500 ? 'invalid_request' : 'internal';
  }
}

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

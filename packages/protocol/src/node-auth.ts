import { ProtocolError } from './errors.js';
import { hexToBytes } from './hex.js';
import { canonicalSha256Hex } from './keys.js';
import { sha256Hex } from './keys.js';

/** First line of the registration signing string. */
export const NODE_REGISTER_DOMAIN = 'SVC-NODE-REGISTER-v1';
/** First line of the signed-request signing string. */
export const NODE_REQUEST_DOMAIN = 'SVC-NODE-REQ-v1';
/** Headers of a signed node request (lowercase, as Node's HTTP server exposes them). */
export const NODE_HEADERS = {
  node: 'x-svc-node',
  timestamp: 'x-svc-timestamp',
  signature: 'x-svc-signature',
} as const;
/** Largest accepted difference between `X-SVC-Timestamp` and the server's clock. */
export const NODE_MAX_CLOCK_SKEW_MS = 60_000;

/**
 * The bytes a node signs to register: UTF-8 of
 * `"SVC-NODE-REGISTER-v1\n" + pubkey + "\n" + sha256hex(JCS(body without signature))`.
 * A `signature` property on `body` is ignored, so the received body can be passed as is.
 *
 * @example
 * const body = { pubkey, gpu_model: 'RTX 4090', cpu_cores: 16 };
 * const signature = signHex(registerMessage(pubkey, body), nodeKey);
 */
export function registerMessage(pubkey: string, body: Readonly<Record<string, unknown>>): Buffer {
  hexToBytes(pubkey, 32, '/pubkey');
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new ProtocolError('body must be an object', '');
  }
  const unsigned: Record<string, unknown> = { ...body };
  delete unsigned.signature;
  return Buffer.from(`${NODE_REGISTER_DOMAIN}\n${pubkey}\n${canonicalSha256Hex(unsigned)}`, 'utf8');
}

/** The parts of an HTTP request that a node signs. */
export interface NodeRequest {
  /** HTTP method, any case; signed uppercase. */
  method: string;
  /** Path and query exactly as sent, e.g. `/api/v1/node/work?wait_ms=25000&max=1`. */
  pathWithQuery: string;
  /** Unix milliseconds, the `X-SVC-Timestamp` header. */
  timestamp: number | string;
  /** The raw body bytes (a string is taken as UTF-8); empty for a GET. */
  body?: Uint8Array | string;
}

/**
 * The bytes a node signs for every later call: UTF-8 of `"SVC-NODE-REQ-v1\n" + METHOD + "\n" +
 * path_with_query + "\n" + timestamp + "\n" + sha256hex(body bytes)`.
 *
 * @example
 * const message = requestMessage({
 *   method: 'POST', pathWithQuery: '/api/v1/node/heartbeat', timestamp: Date.now(), body: json,
 * });
 * headers[NODE_HEADERS.signature] = signHex(message, nodeKey);
 */
export function requestMessage(request: NodeRequest): Buffer {
  const { method, pathWithQuery, timestamp, body = '' } = request;
  if (typeof method !== 'string' || !/^[A-Za-z]+$/.test(method)) {
    throw new ProtocolError('method must be an HTTP method name', '/method');
  }
  if (typeof pathWithQuery !== 'string' || !/^\/[\x21-\x7e]*$/.test(pathWithQuery)) {
    throw new ProtocolError('path must start with / and hold only visible ASCII', '/path');
  }
  const ts = String(timestamp);
  if (!/^(?:0|[1-9]\d{0,15})$/.test(ts) || !Number.isSafeInteger(Number(ts))) {
    throw new ProtocolError('timestamp must be unix milliseconds as a decimal integer', '/timestamp');
  }
  if (typeof body !== 'string' && !(body instanceof Uint8Array)) {
    throw new ProtocolError('body must be bytes or a string', '/body');
  }
  const text = `${NODE_REQUEST_DOMAIN}\n${method.toUpperCase()}\n${pathWithQuery}\n${ts}\n${sha256Hex(body)}`;
  return Buffer.from(text, 'utf8');
}

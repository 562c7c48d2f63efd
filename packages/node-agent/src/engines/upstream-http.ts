import type { Readable } from 'node:stream';
import { request } from 'undici';
import { callSignal } from '../call-signal.js';
import { type CallOptions, EngineError } from './interface.js';

export interface UpstreamHttpConfig {
  baseUrl: string;
  apiKey?: string;
  timeoutMs: number;
  /** Injected (tests): every call goes through it. Else `postJson` and `postStream` use undici's `request`, the rest the global fetch. */
  fetch?: typeof fetch;
}

/** A successful upstream response and the mapping for errors met while reading its body. */
export interface UpstreamResponse {
  response: Response;
  /** Turns a failure while reading the body into an EngineError, `context` naming the step. */
  fail(error: unknown, context?: string): EngineError;
  /**
   * The body was read (or given up): the call is over, its timeout cleared. Until then the
   * timeout covers the reading too; a response never ended is aborted when the timeout passes.
   */
  end(): void;
}

/** Takes each piece of a body as it arrives; returns false to stop reading. */
export type ChunkReader = (chunk: Uint8Array) => boolean | void;

/** A successful streamed upstream response (an SSE chat answer), read as it arrives. */
export interface UpstreamStream {
  /**
   * Calls `onChunk` with each piece of the body as it arrives, until it returns false or the body
   * ends; rejects when reading fails or `onChunk` throws. The rest of a body left after a stop
   * (the upstream's `[DONE]` comes before its end) is read and dropped behind the call, up to
   * {@link DRAIN_LIMIT_BYTES} within the call's timeout, so that its connection serves the next call
   * instead of being closed.
   */
  read(onChunk: ChunkReader): Promise<void>;
  /** Turns a failure while reading the body into an EngineError, `context` naming the step. */
  fail(error: unknown, context?: string): EngineError;
}

/** The most of a stopped stream's rest that is read to keep its connection; past it the connection is closed. */
export const DRAIN_LIMIT_BYTES = 64 * 1024;

export interface UpstreamHttp {
  /**
   * POSTs a JSON body and reads a JSON answer (non-streamed chat, embeddings, images): through
   * undici's `request` (no WHATWG streams, Request or Response objects: about a third of the
   * CPU of `fetch`, which was half of `svc node`'s per request), or the injected fetch. Same
   * errors as `post` + `readJson`, except that a redirect is not followed (it is the status's error).
   */
  postJson(path: string, json: unknown, options?: CallOptions): Promise<unknown>;
  /**
   * POSTs a JSON body and answers its streamed body (a streamed chat): through undici's `request`
   * on the same kept-alive connections as `postJson`, or the injected fetch. A non-2xx status is
   * its EngineError, as for `postJson`.
   */
  postStream(path: string, json: unknown, options?: CallOptions): Promise<UpstreamStream>;
  post(path: string, body: { json: unknown } | { form: FormData }, options?: CallOptions): Promise<UpstreamResponse>;
  get(url: string, options?: CallOptions): Promise<UpstreamResponse>;
  /** Aborts every call in flight; they fail with a retryable "engine closed". */
  close(): void;
}

/**
 * Statuses after which another node might succeed although they are 4xx: the upstream timed
 * out (408), is rate limiting (429), or this node's upstream is misconfigured (wrong key 401/403,
 * model not pulled 404). Every other 4xx is the request's fault and is final.
 */
const RETRYABLE_4XX = new Set([401, 403, 404, 408, 429]);

function upstreamMessage(text: string): string {
  try {
    const body: unknown = JSON.parse(text);
    if (typeof body === 'object' && body !== null) {
      const { error, message, detail } = body as { error?: unknown; message?: unknown; detail?: unknown };
      if (typeof error === 'string') return error;
      if (typeof error === 'object' && error !== null && typeof (error as { message?: unknown }).message === 'string') {
        return (error as { message: string }).message;
      }
      if (typeof message === 'string') return message;
      if (typeof detail === 'string') return detail;
    }
  } catch {
    // not JSON: use the text itself
  }
  return text.trim().slice(0, 500);
}

/** The EngineError for a non-2xx upstream status; the message is the upstream's own. */
export function statusError(status: number, bodyText: string): EngineError {
  const message = upstreamMessage(bodyText) || `HTTP ${status}`;
  if (status >= 500 || RETRYABLE_4XX.has(status)) {
    return new EngineError(`upstream returned ${status}: ${message}`, true, status);
  }
  return new EngineError(message, false, status);
}

function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = (error as { cause?: unknown }).cause;
  if (cause instanceof Error) return `${error.message} (${(cause as { code?: string }).code ?? cause.message})`;
  return error.message;
}

/**
 * The HTTP side of the OpenAI-compatible engine: base URL, bearer key, the timeout combined with
 * the caller's signal, and the mapping of every failure to EngineError.
 */
export function createUpstreamHttp(config: UpstreamHttpConfig): UpstreamHttp {
  const closing = new AbortController();
  const base = config.baseUrl.replace(/\/+$/, '');
  const origin = new URL(base).origin;

  /**
   * The call's signal (timeout, engine closed, caller), the mapping of its failures to EngineError,
   * and `end`, for when the call is over (its body read or given up): it clears the timeout and
   * stops following the engine's and the caller's signals (../call-signal.ts).
   */
  function callScope(options: CallOptions) {
    const call = callSignal(config.timeoutMs, [closing.signal, options.signal]);
    const fail = (error: unknown, context = 'upstream request failed'): EngineError => {
      if (error instanceof EngineError) return error;
      if (options.signal?.aborted) return new EngineError('request aborted by the caller', false);
      if (call.timedOut()) return new EngineError(`upstream timed out after ${config.timeoutMs} ms`, true);
      if (closing.signal.aborted) return new EngineError('engine closed', true);
      return new EngineError(`${context}: ${describe(error)}`, true);
    };
    return { signal: call.signal, fail, end: call.done };
  }

  async function send(url: string, init: RequestInit, options: CallOptions): Promise<UpstreamResponse> {
    const { signal, fail, end } = callScope(options);
    let response: Response;
    try {
      if (signal.aborted) throw fail(signal.reason);
      const headers = new Headers(init.headers);
      // The key goes only to the upstream itself, not to a third-party image host.
      if (config.apiKey && new URL(url).origin === origin) headers.set('authorization', `Bearer ${config.apiKey}`);
      try {
        response = await (config.fetch ?? fetch)(url, { ...init, headers, signal });
      } catch (error) {
        throw fail(error);
      }
      if (!response.ok) {
        const text = await response.text().catch(() => '');
        throw statusError(response.status, text);
      }
    } catch (error) {
      end();
      throw error;
    }
    return { response, fail, end };
  }

  const post: UpstreamHttp['post'] = (path, body, options = {}) => {
    const init: RequestInit =
      'json' in body
        ? { method: 'POST', body: JSON.stringify(body.json), headers: { 'content-type': 'application/json' } }
        : { method: 'POST', body: body.form };
    return send(`${base}${path}`, init, options);
  };

  /**
   * A JSON POST through undici's `request`: its status and body, or the call's EngineError. The
   * call is over when the body closes (read to its end, or destroyed).
   */
  async function requestJson(path: string, json: unknown, options: CallOptions) {
    const { signal, fail, end } = callScope(options);
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (config.apiKey) headers.authorization = `Bearer ${config.apiKey}`;
    try {
      if (signal.aborted) throw fail(signal.reason);
      const response = await request(`${base}${path}`, { method: 'POST', headers, body: JSON.stringify(json), signal });
      response.body.once('close', end);
      return { status: response.statusCode, body: response.body, fail };
    } catch (error) {
      end();
      throw fail(error);
    }
  }

  return {
    async postJson(path, json, options = {}) {
      if (config.fetch !== undefined) return readJson(await post(path, { json }, options));
      const { status, body, fail } = await requestJson(path, json, options);
      let text: string;
      try {
        text = await body.text();
      } catch (error) {
        throw fail(error, 'reading the upstream response failed');
      }
      if (status < 200 || status > 299) throw statusError(status, text);
      try {
        return JSON.parse(text) as unknown;
      } catch {
        throw new EngineError(`upstream returned invalid JSON: ${text.slice(0, 200)}`, true);
      }
    },
    async postStream(path, json, options = {}) {
      if (config.fetch !== undefined) {
        const { response, fail, end } = await post(path, { json }, options);
        const stream = response.body;
        if (stream === null) {
          end();
          throw new EngineError('upstream returned an empty stream', true);
        }
        return { read: (onChunk) => readWebBody(stream, onChunk).finally(end), fail };
      }
      const { status, body, fail } = await requestJson(path, json, options);
      if (status < 200 || status > 299) throw statusError(status, await body.text().catch(() => ''));
      return { read: (onChunk) => readNodeBody(body, onChunk), fail };
    },
    post,
    get(url, options = {}) {
      return send(new URL(url, `${base}/`).href, { method: 'GET' }, options);
    },
    close() {
      closing.abort();
    },
  };
}

/** The response body as JSON; invalid JSON is the upstream's fault, so retryable. */
export async function readJson(upstream: UpstreamResponse): Promise<unknown> {
  let text: string;
  try {
    text = await upstream.response.text();
  } catch (error) {
    throw upstream.fail(error, 'reading the upstream response failed');
  } finally {
    upstream.end();
  }
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new EngineError(`upstream returned invalid JSON: ${text.slice(0, 200)}`, true);
  }
}

/**
 * Reads a Node body (undici's) as it arrives. After a stop the body keeps flowing into nothing
 * until it ends (the connection then returns to its pool) or passes DRAIN_LIMIT_BYTES (then it
 * is destroyed, closing the connection); errors after a stop are nobody's.
 */
function readNodeBody(body: Readable, onChunk: ChunkReader): Promise<void> {
  return new Promise((resolve, reject) => {
    let stopped = false;
    let dropped = 0;
    body.on('data', (chunk: Buffer) => {
      if (stopped) {
        dropped += chunk.length;
        if (dropped > DRAIN_LIMIT_BYTES) body.destroy();
        return;
      }
      try {
        if (onChunk(chunk) !== false) return;
      } catch (error) {
        stopped = true;
        body.destroy();
        reject(error instanceof Error ? error : new Error(String(error)));
        return;
      }
      stopped = true;
      resolve();
    });
    body.on('end', () => {
      if (stopped) return;
      stopped = true;
      resolve();
    });
    body.on('error', (error) => {
      if (stopped) return;
      stopped = true;
      reject(error);
    });
  });
}

/** Reads a WHATWG body (an injected fetch's) as it arrives; a stop cancels the rest. */
async function readWebBody(body: ReadableStream<Uint8Array>, onChunk: ChunkReader): Promise<void> {
  const reader = body.getReader();
  let ended = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) {
        ended = true;
        return;
      }
      if (onChunk(value) === false) return;
    }
  } finally {
    if (!ended) await reader.cancel().catch(() => undefined);
    reader.releaseLock();
  }
}

import { createServer, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { wavDurationSeconds } from '../src/engines/wav.js';
import {
  countWords,
  createPng,
  echoReply,
  hashedEmbedding,
  parseImageSize,
  surfaceReply,
  type TestTool,
} from './openai-test-server-content.js';

/**
 * A small, deterministic, real HTTP server (127.0.0.1, random port) speaking OpenAI's wire
 * format, as a fixture for engine and agent tests: `/v1/models`, `/v1/chat/completions` (an
 * echo model, streamed in OpenAI's exact SSE format; with tools it calls the first tool (or the
 * one `tool_choice` names) with arguments filled from the last user message, after tool results
 * it answers text quoting them, and `response_format` gets JSON of the schema: see
 * `surfaceReply`), `/v1/embeddings` (hashed bag of words),
 * `/v1/audio/transcriptions` (multipart; WAV durations), `/v1/images/generations` (tiny PNGs).
 * Its token count is whitespace-separated words.
 */
export interface OpenAITestServerOptions {
  /** When set, every request needs `Authorization: Bearer <apiKey>` (else 401). */
  apiKey?: string;
  /** Artificial delay before every answer, in ms; default 0. See also `setDelay`. */
  delayMs?: number;
  /** Embedding width per model name, over the defaults (all-MiniLM-L6-v2 384, nomic-embed-text 768; others 384). */
  embeddingDims?: Record<string, number>;
  /** Leave `usage` out of chat and embedding answers (an upstream that does not count). */
  omitUsage?: boolean;
  /** `text-only`: answer transcriptions with `{text}` whatever `response_format` asks. */
  transcriptionFormat?: 'auto' | 'text-only';
  /** `url`: answer image generations with URLs (served by this server) even when `b64_json` is asked. */
  imageResponse?: 'auto' | 'url';
  /** Ids listed by `/v1/models`. */
  models?: string[];
  /** Pause between the events of a streamed chat answer, in ms (default 1), to make streaming visible. */
  streamDelayMs?: number;
}

/** Failure injection for the next `times` requests (default 1). */
export type OpenAITestServerFailure =
  | { status: number; message?: string; times?: number }
  /** Streamed answers: cut the connection after `dropAfterChunks` SSE events; others: at once. */
  | { dropAfterChunks: number; times?: number };

export interface OpenAITestRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  /** Parsed JSON body, when the request had one. */
  body?: unknown;
  /** Multipart body: text fields and the files' descriptions. */
  form?: { fields: Record<string, string>; files: { field: string; filename: string; type: string; size: number }[] };
}

export interface OpenAITestServer {
  /** Base URL ending in `/v1`. */
  url: string;
  /** Every request received, in order, failed ones included. */
  requests: OpenAITestRequest[];
  setFailure(failure: OpenAITestServerFailure | undefined): void;
  setDelay(ms: number): void;
  close(): Promise<void>;
}

const DEFAULT_DIMS: Record<string, number> = { 'all-MiniLM-L6-v2': 384, 'all-minilm': 384, 'nomic-embed-text': 768 };
const DEFAULT_MODELS = ['tinyllama', 'all-MiniLM-L6-v2', 'nomic-embed-text', 'whisper-base', 'sdxl-turbo'];
const MAX_BODY = 50 * 1024 * 1024;

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly code: string | null = null,
  ) {
    super(message);
  }
}

type Json = Record<string, unknown>;

interface Exchange {
  req: IncomingMessage;
  res: ServerResponse;
  record: OpenAITestRequest;
  raw: Buffer;
  /** SSE events to send before cutting the connection, when a drop is injected. */
  dropAfter?: number;
}

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.destroyed) return;
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

function sendError(res: ServerResponse, error: HttpError): void {
  const type = error.status >= 500 ? 'server_error' : 'invalid_request_error';
  const headers: Record<string, string> = error.status === 429 ? { 'retry-after': '1' } : {};
  sendJson(res, error.status, { error: { message: error.message, type, param: null, code: error.code } }, headers);
}

function jsonBody(ex: Exchange): Json {
  const body = ex.record.body;
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw new HttpError(400, 'expected a JSON object body');
  return body as Json;
}

function requireString(body: Json, field: string): string {
  const value = body[field];
  if (typeof value !== 'string' || value === '')
    throw new HttpError(400, `'${field}' is a required string`, 'invalid_value');
  return value;
}

/**
 * Starts the server.
 *
 * @example
 * const upstream = await startOpenAITestServer({ apiKey: 'sk-test' });
 * upstream.setFailure({ status: 503, times: 2 });
 * // ... point an engine at upstream.url ...
 * await upstream.close();
 */
export async function startOpenAITestServer(options: OpenAITestServerOptions = {}): Promise<OpenAITestServer> {
  const requests: OpenAITestRequest[] = [];
  const images = new Map<string, Buffer>();
  let failure: (OpenAITestServerFailure & { left: number }) | undefined;
  let delayMs = options.delayMs ?? 0;
  let sequence = 0;
  let url = '';

  const nextId = (prefix: string): string => `${prefix}-test-${++sequence}`;
  const now = (): number => Math.floor(Date.now() / 1000);

  async function chatCompletions(ex: Exchange): Promise<void> {
    const body = jsonBody(ex);
    const model = requireString(body, 'model');
    const messages = body.messages;
    if (!Array.isArray(messages) || messages.length === 0)
      throw new HttpError(400, "'messages' must be a non-empty array");
    const contents = messages.map((m: unknown) => {
      const message = m as { role?: unknown; content?: unknown; tool_calls?: unknown };
      const content = message?.content === null && Array.isArray(message.tool_calls) ? '' : message?.content;
      if (typeof message?.role !== 'string' || typeof content !== 'string') {
        throw new HttpError(400, 'each message needs a string role and content (null only with tool_calls)');
      }
      return { role: message.role, content };
    });
    const maxTokens = body.max_tokens;
    if (maxTokens !== undefined && (typeof maxTokens !== 'number' || !Number.isInteger(maxTokens) || maxTokens < 1)) {
      throw new HttpError(400, "'max_tokens' must be a positive integer");
    }
    const lastUser = [...contents].reverse().find((m) => m.role === 'user')?.content ?? '';
    const tools: TestTool[] = Array.isArray(body.tools)
      ? body.tools.map((t: unknown) => {
          const fn = (t as { function?: { name?: unknown; parameters?: unknown } }).function;
          return { name: String(fn?.name), parameters: fn?.parameters };
        })
      : [];
    const surface = surfaceReply({
      tools,
      toolChoice: body.tool_choice,
      responseFormat: body.response_format,
      last: contents[contents.length - 1] ?? { role: 'user', content: '' },
      toolResults: contents.filter((m) => m.role === 'tool').map((m) => m.content),
      lastUser,
    });
    const echo = echoReply(lastUser, maxTokens);
    const toolCall = surface && 'toolCall' in surface ? { id: nextId('call'), ...surface.toolCall } : undefined;
    const words = surface && 'content' in surface ? [surface.content] : toolCall ? [] : echo.words;
    const finishReason = toolCall ? 'tool_calls' : surface ? 'stop' : echo.finishReason;
    const content = words.join(' ');
    const usage = {
      prompt_tokens: contents.reduce((sum, m) => sum + countWords(m.content), 0),
      completion_tokens: toolCall ? Math.max(1, countWords(toolCall.arguments)) : countWords(content),
      total_tokens: 0,
    };
    usage.total_tokens = usage.prompt_tokens + usage.completion_tokens;
    const id = nextId('chatcmpl');
    const created = now();
    const head = { id, created, model, system_fingerprint: 'fp_svc_test' };
    const toolCalls = toolCall
      ? [{ id: toolCall.id, type: 'function', function: { name: toolCall.name, arguments: toolCall.arguments } }]
      : undefined;

    if (body.stream !== true) {
      if (ex.dropAfter !== undefined) return void ex.res.destroy();
      const message = toolCalls
        ? { role: 'assistant', content: null, tool_calls: toolCalls }
        : { role: 'assistant', content };
      sendJson(ex.res, 200, {
        ...head,
        object: 'chat.completion',
        choices: [{ index: 0, message, logprobs: null, finish_reason: finishReason }],
        ...(options.omitUsage ? {} : { usage }),
      });
      return;
    }

    const includeUsage = (body.stream_options as { include_usage?: unknown } | undefined)?.include_usage === true;
    const chunk = (choices: unknown[], extra: Json = {}): Json => ({
      ...head,
      object: 'chat.completion.chunk',
      choices,
      ...(includeUsage ? { usage: null } : {}),
      ...extra,
    });
    const events: Json[] = [
      chunk([{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }]),
      ...words.map((word, i) =>
        chunk([{ index: 0, delta: { content: i === 0 ? word : ` ${word}` }, logprobs: null, finish_reason: null }]),
      ),
      // A tool call as OpenAI streams one: id and name first, then the arguments in two pieces.
      ...(toolCall
        ? [
            { index: 0, id: toolCall.id, type: 'function', function: { name: toolCall.name, arguments: '' } },
            { index: 0, function: { arguments: toolCall.arguments.slice(0, toolCall.arguments.length >> 1) } },
            { index: 0, function: { arguments: toolCall.arguments.slice(toolCall.arguments.length >> 1) } },
          ].map((fragment) =>
            chunk([{ index: 0, delta: { tool_calls: [fragment] }, logprobs: null, finish_reason: null }]),
          )
        : []),
      chunk([{ index: 0, delta: {}, logprobs: null, finish_reason: finishReason }]),
    ];
    if (includeUsage && !options.omitUsage) events.push(chunk([], { usage }));

    const { res } = ex;
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    let sent = 0;
    for (const event of [...events.map((e) => JSON.stringify(e)), '[DONE]']) {
      if (res.destroyed) return;
      if (ex.dropAfter !== undefined && sent >= ex.dropAfter) return void res.destroy();
      // Flushed one by one, so clients see the events arrive in separate reads and a cut
      // after K events delivers exactly K.
      await new Promise<void>((resolve) => res.write(`data: ${event}\n\n`, () => resolve()));
      sent++;
      await new Promise((resolve) => setTimeout(resolve, options.streamDelayMs ?? 1));
    }
    res.end();
  }

  function embeddings(ex: Exchange): void {
    const body = jsonBody(ex);
    const model = requireString(body, 'model');
    const input = typeof body.input === 'string' ? [body.input] : body.input;
    if (!Array.isArray(input) || input.length === 0 || !input.every((x) => typeof x === 'string')) {
      throw new HttpError(400, "'input' must be a string or a non-empty array of strings");
    }
    if (ex.dropAfter !== undefined) return void ex.res.destroy();
    const dims = options.embeddingDims?.[model] ?? DEFAULT_DIMS[model] ?? 384;
    const tokens = input.reduce((sum: number, text: string) => sum + countWords(text), 0);
    sendJson(ex.res, 200, {
      object: 'list',
      data: input.map((text: string, index) => ({
        object: 'embedding',
        index,
        embedding: hashedEmbedding(text, dims),
      })),
      model,
      ...(options.omitUsage ? {} : { usage: { prompt_tokens: tokens, total_tokens: tokens } }),
    });
  }

  async function transcriptions(ex: Exchange): Promise<void> {
    const request = new Request('http://test.invalid/', {
      method: 'POST',
      headers: { 'content-type': ex.req.headers['content-type'] ?? '' },
      body: ex.raw,
    });
    let form: FormData;
    try {
      form = await request.formData();
    } catch {
      throw new HttpError(400, 'expected a multipart/form-data body');
    }
    const fields: Record<string, string> = {};
    const files: NonNullable<OpenAITestRequest['form']>['files'] = [];
    let audio: Buffer | undefined;
    for (const [field, value] of form.entries()) {
      if (typeof value === 'string') {
        fields[field] = value;
      } else {
        const bytes = Buffer.from(await value.arrayBuffer());
        files.push({ field, filename: value.name, type: value.type, size: bytes.length });
        if (field === 'file') audio = bytes;
      }
    }
    ex.record.form = { fields, files };
    if (audio === undefined) throw new HttpError(400, "'file' is required");
    requireString(fields, 'model');
    if (ex.dropAfter !== undefined) return void ex.res.destroy();
    const text = `transcribed ${audio.length} bytes of audio`;
    const duration = wavDurationSeconds(audio) ?? 0;
    const format = options.transcriptionFormat === 'text-only' ? 'json' : (fields.response_format ?? 'json');
    if (format === 'text') {
      ex.res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' });
      ex.res.end(`${text}\n`);
    } else if (format === 'json') {
      sendJson(ex.res, 200, { text });
    } else if (format === 'verbose_json') {
      const segment = {
        id: 0,
        seek: 0,
        start: 0,
        end: duration,
        text,
        tokens: [],
        temperature: 0,
        avg_logprob: -0.1,
        compression_ratio: 1,
        no_speech_prob: 0,
      };
      sendJson(ex.res, 200, {
        task: 'transcribe',
        language: fields.language ?? 'english',
        duration,
        text,
        segments: [segment],
      });
    } else {
      throw new HttpError(400, `response_format ${format} is not supported by the test server`);
    }
  }

  function imageGenerations(ex: Exchange): void {
    const body = jsonBody(ex);
    requireString(body, 'model');
    const prompt = requireString(body, 'prompt');
    const n = body.n ?? 1;
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > 10) throw new HttpError(400, "'n' must be 1..10");
    const size = parseImageSize(body.size);
    if (size === undefined) throw new HttpError(400, "'size' must be WxH");
    if (ex.dropAfter !== undefined) return void ex.res.destroy();
    const asUrl = options.imageResponse === 'url' || body.response_format !== 'b64_json';
    const data = Array.from({ length: n }, (_, i) => {
      const png = createPng(size.width, size.height, `${prompt}#${i}`);
      if (!asUrl) return { b64_json: png.toString('base64'), revised_prompt: prompt };
      const id = nextId('img');
      images.set(id, png);
      return { url: `${url}/files/${id}.png`, revised_prompt: prompt };
    });
    sendJson(ex.res, 200, { created: now(), data });
  }

  async function route(ex: Exchange): Promise<void> {
    const { method } = ex.req;
    const path = ex.record.path;
    if (options.apiKey !== undefined && ex.req.headers.authorization !== `Bearer ${options.apiKey}`) {
      throw new HttpError(401, 'Incorrect API key provided', 'invalid_api_key');
    }
    if (method === 'GET' && path === '/v1/models') {
      const ids = options.models ?? DEFAULT_MODELS;
      return sendJson(ex.res, 200, {
        object: 'list',
        data: ids.map((id) => ({ id, object: 'model', created: 1_735_689_600, owned_by: 'svc-test' })),
      });
    }
    const file = /^\/v1\/files\/([\w-]+)\.png$/.exec(path);
    if (method === 'GET' && file) {
      const png = images.get(file[1] ?? '');
      if (png === undefined) throw new HttpError(404, 'no such file');
      ex.res.writeHead(200, { 'content-type': 'image/png' });
      return void ex.res.end(png);
    }
    if (method !== 'POST') throw new HttpError(404, `no route ${method} ${path}`);
    if (path === '/v1/chat/completions') return chatCompletions(ex);
    if (path === '/v1/embeddings') return embeddings(ex);
    if (path === '/v1/audio/transcriptions') return transcriptions(ex);
    if (path === '/v1/images/generations') return imageGenerations(ex);
    throw new HttpError(404, `no route ${method} ${path}`);
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of req) {
      size += (chunk as Buffer).length;
      if (size > MAX_BODY) return sendError(res, new HttpError(413, 'body too large'));
      chunks.push(chunk as Buffer);
    }
    const raw = Buffer.concat(chunks);
    const record: OpenAITestRequest = {
      method: req.method ?? 'GET',
      path: (req.url ?? '/').split('?')[0] ?? '/',
      headers: req.headers,
    };
    requests.push(record);
    const ex: Exchange = { req, res, record, raw };
    try {
      if ((req.headers['content-type'] ?? '').includes('application/json') && raw.length > 0) {
        try {
          record.body = JSON.parse(raw.toString('utf8'));
        } catch {
          throw new HttpError(400, 'invalid JSON body');
        }
      }
      if (delayMs > 0) await new Promise((resolve) => setTimeout(resolve, delayMs));
      if (failure !== undefined && failure.left > 0) {
        const current = failure;
        current.left--;
        if (current.left === 0) failure = undefined;
        if ('status' in current)
          throw new HttpError(current.status, current.message ?? `injected failure ${current.status}`);
        ex.dropAfter = current.dropAfterChunks;
      }
      await route(ex);
    } catch (error) {
      sendError(res, error instanceof HttpError ? error : new HttpError(500, String(error)));
    }
  }

  const server = createServer((req, res) => {
    void handle(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  url = `http://127.0.0.1:${port}/v1`;

  return {
    url,
    requests,
    setFailure(next) {
      failure = next === undefined ? undefined : { ...next, left: next.times ?? 1 };
    },
    setDelay(ms) {
      delayMs = ms;
    },
    close() {
      return new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      });
    },
  };
}

import { clearSession, sessionToken } from './session';

/** The API's error body (docs/errors.md), as thrown by every call here. */
export class ApiError extends Error {
  override name = 'ApiError';
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details: { path: string; message: string }[] = [],
  ) {
    super(message);
  }
}

/** Listeners told when the server refuses the session (expired, logged out elsewhere). */
const unauthorizedListeners = new Set<() => void>();
export function onUnauthorized(listener: () => void): () => void {
  unauthorizedListeners.add(listener);
  return () => unauthorizedListeners.delete(listener);
}

export interface RequestOptions {
  method?: string;
  body?: unknown;
  query?: Record<string, string | number | undefined>;
  /** Send no session token (sign-up, log-in, invite acceptance). */
  anonymous?: boolean;
  signal?: AbortSignal;
}

export function urlOf(path: string, query: RequestOptions['query'] = {}): string {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== '') params.set(k, String(v));
  const qs = params.toString();
  return qs ? `${path}?${qs}` : path;
}

/** A fetch on the same origin with the session token as bearer; errors become ApiError. */
export async function request(path: string, options: RequestOptions = {}): Promise<Response> {
  const headers: Record<string, string> = { accept: 'application/json' };
  const token = sessionToken();
  if (token && !options.anonymous) headers.authorization = `Bearer ${token}`;
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  let res: Response;
  try {
    res = await fetch(urlOf(path, options.query), {
      method: options.method ?? (options.body === undefined ? 'GET' : 'POST'),
      headers,
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
      signal: options.signal,
      credentials: 'omit',
    });
  } catch (err) {
    if ((err as Error).name === 'AbortError') throw err;
    throw new ApiError(0, 'network', 'The server could not be reached. Check your connection and try again.');
  }
  if (res.ok) return res;
  let body: { error?: string; message?: string; details?: { path: string; message: string }[] } = {};
  try {
    const raw = (await res.json()) as typeof body | { error: { message?: string; code?: string } };
    // Under /v1/ errors come in OpenAI's envelope (docs/errors.md); read both shapes.
    body = typeof raw.error === 'object' ? { error: raw.error.code, message: raw.error.message } : (raw as typeof body);
  } catch {
    // not our error shape (a proxy's page): keep the status line
  }
  if (res.status === 401 && token && !options.anonymous) {
    clearSession();
    for (const listener of unauthorizedListeners) listener();
  }
  throw new ApiError(
    res.status,
    body.error ?? 'http_error',
    body.message ?? `${res.status} ${res.statusText}`,
    body.details,
  );
}

/** `request` and parse the JSON answer. */
export async function api<T>(path: string, options: RequestOptions = {}): Promise<T> {
  const res = await request(path, options);
  return (await res.json()) as T;
}

/** Saves bytes under a file name through a temporary object URL (no token in any URL). */
export function saveBlob(blob: Blob, fileName: string): void {
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = fileName;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

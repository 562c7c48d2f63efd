/** What `GET /api/v1/health` told about a server, and when (for the clock-skew estimate). */
export interface ServerHealth {
  status: number;
  ok: boolean;
  version: string | undefined;
  /** The server's clock (its `Date` header, whole seconds) minus ours at the middle of the call, in ms. */
  skewMs: number | undefined;
  roundTripMs: number;
}

/** `path` under a server base URL that may carry a prefix (`https://host/svc`). */
export function serverUrl(server: string, path: string): string {
  return new URL(path.replace(/^\//, ''), server.endsWith('/') ? server : `${server}/`).href;
}

/**
 * Where a server offers the agent tarball of svc `version` (`GET /api/v1/downloads/svc-VERSION.tgz`).
 *
 * @example
 * agentDownloadUrl('https://svc.example', '0.2.0'); // 'https://svc.example/api/v1/downloads/svc-0.2.0.tgz'
 */
export function agentDownloadUrl(server: string, version: string): string {
  return serverUrl(server, `/api/v1/downloads/svc-${version}.tgz`);
}

/**
 * Asks the server's public health endpoint for its version and reads its clock from the `Date`
 * header; throws when no answer comes within `timeoutMs`. `now` is this machine's clock (tests
 * shift it to simulate skew).
 *
 * @example
 * const { version, skewMs } = await fetchServerHealth('https://svc.example');
 */
export async function fetchServerHealth(
  server: string,
  options: { now?: () => number; timeoutMs?: number; signal?: AbortSignal; fetch?: typeof fetch } = {},
): Promise<ServerHealth> {
  const now = options.now ?? Date.now;
  const sent = now();
  const res = await (options.fetch ?? fetch)(serverUrl(server, '/api/v1/health'), {
    signal: options.signal
      ? AbortSignal.any([options.signal, AbortSignal.timeout(options.timeoutMs ?? 10_000)])
      : AbortSignal.timeout(options.timeoutMs ?? 10_000),
    headers: { accept: 'application/json' },
  });
  const body: unknown = await res.json().catch(() => undefined);
  const received = now();
  const date = Date.parse(res.headers.get('date') ?? '');
  // The Date header has whole seconds: the server's clock lies somewhere in [date, date + 1 s).
  const skewMs = Number.isNaN(date) ? undefined : Math.round(date + 500 - (sent + received) / 2);
  const record = typeof body === 'object' && body !== null ? (body as Record<string, unknown>) : {};
  return {
    status: res.status,
    ok: record.ok === true,
    version: typeof record.version === 'string' ? record.version : undefined,
    skewMs,
    roundTripMs: received - sent,
  };
}

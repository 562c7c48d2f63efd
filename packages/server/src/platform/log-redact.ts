/**
 * What the logs must not carry from a URL: the values of query parameters that grant access
 * (presigned `signature`, S3's `X-Amz-Signature` / `X-Amz-Credential` / `X-Amz-Security-Token`,
 * tokens, keys, codes). The parameter names stay, so a log still says what was asked.
 */
const SECRET_PARAM = /sig|token|secret|passw|key|auth|credential|session|code/i;

/**
 * A request URL (path and query, or absolute) with the values of token-like query parameters
 * replaced by `[redacted]`.
 *
 * @example
 * redactQuery('/v1/files/a.png?expires=1&signature=ab12'); // '/v1/files/a.png?expires=1&signature=[redacted]'
 */
export function redactQuery(url: string): string {
  const q = url.indexOf('?');
  if (q < 0) return url;
  const query = url
    .slice(q + 1)
    .split('&')
    .map((pair) => {
      const eq = pair.indexOf('=');
      const rawName = eq < 0 ? pair : pair.slice(0, eq);
      let name = rawName;
      try {
        name = decodeURIComponent(rawName.replace(/\+/g, ' '));
      } catch {
        // A malformed escape: judge the raw name.
      }
      return eq >= 0 && SECRET_PARAM.test(name) ? `${rawName}=[redacted]` : pair;
    });
  return `${url.slice(0, q)}?${query.join('&')}`;
}

/** The request as logged (Fastify's fields), its URL redacted. */
export function requestLogView(req: {
  method?: string;
  url?: string;
  host?: string;
  ip?: string;
  socket?: { remotePort?: number };
}): Record<string, unknown> {
  return {
    method: req.method,
    url: typeof req.url === 'string' ? redactQuery(req.url) : req.url,
    host: req.host,
    remoteAddress: req.ip,
    remotePort: req.socket?.remotePort,
  };
}

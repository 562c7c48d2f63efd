import type { FastifyInstance } from 'fastify';
import { ApiError, type ErrorDetail } from './errors.js';

/**
 * Input every route refuses before its own schema sees it (docs/security.md, "Bad input"): what
 * the store cannot hold or the server cannot walk. PostgreSQL refuses U+0000 in `text` and
 * `jsonb`, and lone UTF-16 surrogates in `jsonb`; a JSON value nested thousands deep overflows
 * the stack of every recursive walk after the parser (validation, `JSON.stringify`). One check
 * here covers every field of every route, present and future.
 */

/** Deepest nesting of arrays and objects a JSON body may have. */
export const MAX_JSON_DEPTH = 64;

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function stringProblem(s: string): string | undefined {
  if (s.includes('\u0000')) return 'must not contain NUL characters (U+0000)';
  if (LONE_SURROGATE.test(s)) return 'must be valid Unicode (no lone surrogates)';
  return undefined;
}

const pointer = (path: readonly (string | number)[]) =>
  `/${path.map((p) => String(p).replace(/~/g, '~0').replace(/\//g, '~1')).join('/')}`.replace(/^\/$/, '/');

/**
 * The first problem of a parsed JSON value: a string (value or key) holding NUL or a lone
 * surrogate, or nesting deeper than `maxDepth`. Walks without recursion, so any depth the parser
 * accepted is safe to inspect.
 *
 * @example
 * unsafeJson({ name: 'a\u0000b' }) // { path: '/name', message: 'must not contain NUL characters (U+0000)' }
 */
export function unsafeJson(value: unknown, maxDepth = MAX_JSON_DEPTH): ErrorDetail | undefined {
  const stack: { value: unknown; path: (string | number)[] }[] = [{ value, path: [] }];
  for (let next = stack.pop(); next; next = stack.pop()) {
    const { value: v, path } = next;
    if (typeof v === 'string') {
      const problem = stringProblem(v);
      if (problem) return { path: pointer(path), message: problem };
    } else if (typeof v === 'object' && v !== null) {
      if (path.length >= maxDepth)
        return {
          path: pointer(path),
          message: `is nested too deep (more than ${maxDepth} levels of arrays and objects)`,
        };
      if (Array.isArray(v)) {
        for (let i = v.length - 1; i >= 0; i--) stack.push({ value: v[i], path: [...path, i] });
      } else {
        for (const [key, child] of Object.entries(v)) {
          const problem = stringProblem(key);
          if (problem) return { path: pointer([...path, key]), message: `field name ${problem}` };
          stack.push({ value: child, path: [...path, key] });
        }
      }
    }
  }
  return undefined;
}

/** Throws `invalid_request` naming the first unsafe part of a parsed body. */
export function assertSafeJson(value: unknown, part = 'body'): void {
  const detail = unsafeJson(value);
  if (detail) throw new ApiError('invalid_request', `invalid ${part}: ${detail.path} ${detail.message}`, [detail]);
}

/** Whether a raw request target (path and query, still percent-encoded) carries a NUL. */
export function urlHasNul(url: string): boolean {
  return url.includes('\u0000') || /%00/i.test(url);
}

/**
 * Refuses a NUL anywhere in the path or query string (400) before routing decodes it into a
 * parameter; JSON bodies are checked by their parser (see app.ts) with {@link assertSafeJson}.
 */
export function installInputGuard(app: FastifyInstance): void {
  app.addHook('onRequest', async (request) => {
    if (urlHasNul(request.url)) {
      throw new ApiError(
        'invalid_request',
        'invalid request: the path and query string must not contain NUL characters (%00)',
        [{ path: '/', message: 'must not contain NUL characters (U+0000)' }],
      );
    }
  });
}

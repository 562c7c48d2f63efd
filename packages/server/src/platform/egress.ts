import { isIP } from 'node:net';
import {
  classifyAddress,
  firstRefused,
  guardedDispatcher,
  systemResolve,
  type AddressVerdict,
  type Resolve,
} from '@svc/protocol/egress';
import { fetch as undiciFetch, type Dispatcher, type RequestInit, type Response } from 'undici';
import { ApiError } from './errors.js';

/**
 * The server's outbound side. Every request the server makes to a URL a client gave (payload_url,
 * webhooks, delivery PUT URLs, repository hosts) goes through {@link Egress.fetch}, whose undici
 * dispatcher judges every address at connect time by the policy in `@svc/protocol/egress` (shared
 * with the node agent). docs/security.md lists what is allowed and refused.
 */

/** A refused connection: the message names the address and why (recorded on the job or webhook). */
export class EgressRefusedError extends Error {
  override name = 'EgressRefusedError';
  readonly code = 'EGRESS_REFUSED';
  constructor(
    readonly host: string,
    readonly verdict: Extract<AddressVerdict, { allowed: false }>,
  ) {
    super(
      `refused to connect to ${host === verdict.address ? host : `${host} (${verdict.address})`}: ${verdict.reason} addresses are not reachable from the platform`,
    );
  }
}

/** The outbound side of the platform: a URL check for a clear 400 early, and the guarded fetch. */
export interface Egress {
  /** The undici dispatcher that judges every address at connect time. */
  dispatcher: Dispatcher;
  /** Checks a URL before it is stored or called (scheme, credentials, addresses now); throws invalid_request naming `path`. */
  checkUrl(raw: string, path: string): Promise<URL>;
  /** {@link checkUrl}, answering the addresses it checked too: a client that resolves on its own (git) is pinned to them. */
  checkAddresses(raw: string, path: string): Promise<CheckedUrl>;
  /** undici's fetch through the guarded dispatcher; a refused address rejects with {@link EgressRefusedError}. */
  fetch(url: string | URL, init?: Omit<RequestInit, 'dispatcher'>): Promise<Response>;
  close(): Promise<void>;
}

/**
 * Builds the guarded dispatcher. `allowPrivate` (`--allow-private-egress`) turns the address
 * policy off (tests, private deployments); the scheme and credential checks stay.
 *
 * @example
 * const egress = createEgress({ allowPrivate: false });
 * const res = await egress.fetch('https://example.com/inputs.txt', { redirect: 'error' });
 */
export function createEgress(options: { allowPrivate: boolean; resolve?: Resolve; connectTimeoutMs?: number }): Egress {
  const resolve = options.resolve ?? systemResolve;
  const refusal = (host: string, addresses: string[]): EgressRefusedError | undefined => {
    if (options.allowPrivate) return undefined;
    const verdict = firstRefused(addresses);
    return verdict ? new EgressRefusedError(host, verdict) : undefined;
  };
  const dispatcher = guardedDispatcher({
    refuse: refusal,
    resolve,
    ...(options.connectTimeoutMs === undefined ? {} : { connectTimeoutMs: options.connectTimeoutMs }),
  });

  return {
    dispatcher,
    checkUrl: (raw, path) => checkOutboundUrl(raw, { allowPrivate: options.allowPrivate, path, resolve }),
    checkAddresses: (raw, path) => checkOutboundAddresses(raw, { allowPrivate: options.allowPrivate, path, resolve }),
    async fetch(url, init = {}) {
      try {
        return await undiciFetch(url, { ...init, dispatcher });
      } catch (err) {
        // undici wraps connect errors in "fetch failed": surface the reason a record can show.
        let cause: unknown = err;
        for (let depth = 0; cause instanceof Error && depth < 5; depth++) {
          if (cause instanceof EgressRefusedError) throw cause;
          cause = cause.cause;
        }
        if (err instanceof Error && err.cause instanceof Error && err.message === 'fetch failed')
          throw new Error(`fetch failed: ${err.cause.message}`, { cause: err.cause });
        throw err;
      }
    },
    close: () => dispatcher.close(),
  };
}

/** A URL that passed the check, with the addresses its host resolved to when it was checked. */
export interface CheckedUrl {
  url: URL;
  /** Every address judged (the host itself for an IP literal); empty when private egress is allowed and the name did not resolve. */
  addresses: string[];
}

/**
 * Checks an outbound URL before it is stored or called: http or https only, no credentials in it,
 * and every address its host resolves to now public (unless private egress is allowed). This gives
 * a clear 400 early; the connect-time check of {@link createEgress} is the guard. Throws
 * invalid_request naming `path`.
 */
export async function checkOutboundUrl(
  raw: string,
  options: { allowPrivate: boolean; path: string; resolve?: Resolve },
): Promise<URL> {
  return options.allowPrivate ? parseOutbound(raw, options.path) : (await checkOutboundAddresses(raw, options)).url;
}

const invalid = (path: string, why: string) =>
  new ApiError('invalid_request', `${path.slice(1)} ${why}`, [{ path, message: why }]);

function parseOutbound(raw: string, path: string): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw invalid(path, 'must be an absolute URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw invalid(path, 'must use http or https');
  if (url.username || url.password) throw invalid(path, 'must not carry credentials');
  return url;
}

/**
 * {@link checkOutboundUrl} that answers the addresses it judged. For a client with a resolver of
 * its own (Debian's `git`, through libcurl): connecting to exactly these addresses means a second
 * lookup cannot move the host elsewhere (DNS rebinding). With private egress allowed the name is
 * still resolved (nothing judged); a name that does not resolve then gives no addresses.
 *
 * @example
 * const { url, addresses } = await checkOutboundAddresses('https://github.com/acme/w.git', { allowPrivate: false, path: '/repository_url' });
 */
export async function checkOutboundAddresses(
  raw: string,
  options: { allowPrivate: boolean; path: string; resolve?: Resolve },
): Promise<CheckedUrl> {
  const { path } = options;
  const url = parseOutbound(raw, path);
  const host = url.hostname.replace(/^\[|\]$/g, '');
  let addresses: string[];
  try {
    addresses = isIP(host) ? [host] : (await (options.resolve ?? systemResolve)(host)).map((a) => a.address);
  } catch {
    if (options.allowPrivate) return { url, addresses: [] };
    throw invalid(path, `host ${host} does not resolve`);
  }
  if (options.allowPrivate) return { url, addresses };
  if (addresses.length === 0) throw invalid(path, `host ${host} does not resolve`);
  for (const address of addresses) {
    const verdict = classifyAddress(address);
    if (!verdict.allowed)
      throw invalid(path, `must point to a public address: ${new EgressRefusedError(host, verdict).message}`);
  }
  return { url, addresses };
}

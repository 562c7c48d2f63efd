import { Octokit } from '@octokit/rest';
import type { Config } from '../../platform/config.js';
import type { Egress } from '../../platform/egress.js';

/**
 * The repository host's side of a change request: a GitHub pull request through its REST API
 * (`@octokit/rest`) for hosts listed in `SVC_GITHUB_HOSTS` (default github.com; the API at
 * `SVC_GITHUB_API_URL`), or for any other host a compare URL for the pushed branch. Every API
 * request goes through the platform's egress guard (`ctx.egress.fetch`), whose dispatcher checks
 * the address it actually connects to: a name that resolves to a public address at a URL check
 * and to a private one a moment later (DNS rebinding) is refused at the connection.
 */

/** The part of the egress guard the host calls. */
export type HostEgress = Pick<Egress, 'fetch'>;

export interface HostRepo {
  kind: 'github' | 'other';
  owner: string;
  name: string;
  /** The repository's web address (the URL without `.git`). */
  web: string;
}

export function hostRepoOf(config: Pick<Config, 'workOrders'>, repositoryUrl: string): HostRepo {
  const url = new URL(repositoryUrl);
  const parts = url.pathname
    .replace(/\.git$/, '')
    .split('/')
    .filter(Boolean);
  const web = `${url.origin}/${parts.join('/')}`;
  const github =
    config.workOrders.githubHosts.includes(url.host.toLowerCase()) ||
    config.workOrders.githubHosts.includes(url.hostname.toLowerCase());
  return { kind: github && parts.length === 2 ? 'github' : 'other', owner: parts[0] ?? '', name: parts[1] ?? '', web };
}

export interface ChangeRequest {
  kind: 'pull_request' | 'compare';
  url: string;
  number: number | null;
  branch: string;
  base: string;
}

function octokit(config: Pick<Config, 'workOrders'>, egress: HostEgress, token: string | null): Octokit {
  const guarded = (async (input: string | URL | Request, init?: RequestInit) => {
    const target = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    const { body, headers, method, signal } = init ?? {};
    // undici's fetch under the guarded dispatcher: the same WHATWG shapes as the global one.
    return egress.fetch(target, {
      method,
      headers: headers as Record<string, string>,
      body: body as string | undefined,
      signal: signal ?? null,
      redirect: 'error',
    });
  }) as unknown as typeof fetch;
  return new Octokit({
    ...(token ? { auth: token } : {}),
    baseUrl: config.workOrders.githubApiUrl,
    request: { fetch: guarded },
    log: { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined },
  });
}

/**
 * Opens the change request for a pushed branch: a pull request on GitHub hosts, else the
 * compare URL.
 *
 * @example
 * await openChangeRequest(config, ctx.egress, repo, token, { branch: 'svc/wo-1', base: 'main', title: 'Add x', body: '...' });
 */
export async function openChangeRequest(
  config: Pick<Config, 'workOrders'>,
  egress: HostEgress,
  repo: HostRepo,
  token: string | null,
  pr: { branch: string; base: string; title: string; body: string },
): Promise<ChangeRequest> {
  const ref = (name: string) => encodeURIComponent(name).replace(/%2F/g, '/');
  if (repo.kind !== 'github')
    return {
      kind: 'compare',
      url: `${repo.web}/compare/${ref(pr.base)}...${ref(pr.branch)}`,
      number: null,
      branch: pr.branch,
      base: pr.base,
    };
  const { data } = await octokit(config, egress, token).rest.pulls.create({
    owner: repo.owner,
    repo: repo.name,
    title: pr.title,
    head: pr.branch,
    base: pr.base,
    body: pr.body,
  });
  return { kind: 'pull_request', url: data.html_url, number: data.number, branch: pr.branch, base: pr.base };
}

/** Closes a pull request that will not be merged (a rollback before the merge). */
export async function closePullRequest(
  config: Pick<Config, 'workOrders'>,
  egress: HostEgress,
  repo: HostRepo,
  token: string | null,
  number: number,
): Promise<void> {
  if (repo.kind !== 'github') return;
  await octokit(config, egress, token).rest.pulls.update({
    owner: repo.owner,
    repo: repo.name,
    pull_number: number,
    state: 'closed',
  });
}
